"""ACLs: CreateAcls (30), DescribeAcls (29) and DeleteAcls (31), v0-3 each as Kafka 3.9.

Creations and deletions go through `MetadataService.submit` as the connection's principal, so
they are group-committed and answered once durable; the controller (`replay.controller.acls`)
validates each ACL and filter, and this module turns kio's request into bindings and filters
and the results into the answer, logging one line per ACL created or removed. DescribeAcls
answers from the committed image. v0 requests carry no pattern type: their ACLs and filters
are LITERAL, as Kafka reads them.
A request refused as a whole (the log's storage failed, a cluster check) is answered by
`refusals`, with its code on every item, as every write API's is.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any

from api.protocol.codec import KafkaRequest
from api.server.kafka.base import HandlerGroup, Session
from records.model import AclOperation, AclPermissionType, PatternType, ResourceType
from replay.controller import acls
from replay.controller.commands import AclBinding, AclFilter
from replay.controller.limits import echo


def bindingecho(binding: AclBinding) -> str:
    """An ACL in Kafka's `AclBinding.toString` words, for log lines (one line, clipped)."""
    return (
        f"(pattern=ResourcePattern(resourceType={_name(ResourceType, binding.resource_type)}, "
        f"name={echo(binding.resource_name)}, "
        f"patternType={_name(PatternType, binding.pattern_type)}), "
        f"entry=(principal={echo(binding.principal)}, host={echo(binding.host)}, "
        f"operation={_name(AclOperation, binding.operation)}, "
        f"permissionType={_name(AclPermissionType, binding.permission_type)}))"
    )


def _name(enum: type[IntEnum], code: int) -> str:
    try:
        return enum(code).name
    except ValueError:
        return str(code)


def _pattern(item: Any, field: str) -> int:
    """A v1+ pattern type field, or LITERAL for v0 (which has none)."""
    return int(getattr(item, field, PatternType.LITERAL))


class AclApis(HandlerGroup):
    """CreateAcls, DescribeAcls and DeleteAcls."""

    async def describe_acls(self, request: KafkaRequest, session: Session) -> Any:
        """The ACLs the request's filter matches, grouped by resource pattern."""
        body = request.body
        acl_filter = AclFilter(
            resource_type=int(body.resource_type_filter),
            resource_name=body.resource_name_filter,
            pattern_type=_pattern(body, "pattern_type_filter"),
            principal=body.principal_filter,
            host=body.host_filter,
            operation=int(body.operation),
            permission_type=int(body.permission_type),
        )
        found = self.service.controller.describe_acls(self.service.image, acl_filter)
        return self._answer(
            request,
            throttle_time=0,
            error_code=0,
            error_message=None,
            resources=[
                {
                    "resource_type": resource_type,
                    "resource_name": name,
                    "pattern_type": pattern_type,
                    "acls": [
                        {
                            "principal": b.principal,
                            "host": b.host,
                            "operation": int(b.operation),
                            "permission_type": int(b.permission_type),
                        }
                        for b in bindings
                    ],
                }
                for (resource_type, name, pattern_type), bindings in acls.resources(found)
            ],
        )

    async def create_acls(self, request: KafkaRequest, session: Session) -> Any:
        """Create ACLs; one result per creation, each refused one with INVALID_REQUEST."""
        bindings = [
            AclBinding(
                resource_type=int(c.resource_type),
                resource_name=c.resource_name,
                pattern_type=_pattern(c, "resource_pattern_type"),
                principal=c.principal,
                host=c.host,
                operation=int(c.operation),
                permission_type=int(c.permission_type),
            )
            for c in request.body.creations
        ]
        controller = self.service.controller
        results = await self.service.submit(
            lambda image: controller.create_acls(image, bindings),
            principal=session.principal,
        )
        outcomes = [r.outcome for r in results]
        self._log_change(
            session.principal,
            "create acl",
            ((bindingecho(b), o.error_code) for b, o in zip(bindings, outcomes, strict=True)),
        )
        return self._answer(
            request,
            throttle_time=0,
            results=[
                {"error_code": int(o.error_code), "error_message": o.error_message}
                for o in outcomes
            ],
        )

    async def delete_acls(self, request: KafkaRequest, session: Session) -> Any:
        """Remove the ACLs each filter matches; each filter's result lists them."""
        filters = [
            AclFilter(
                resource_type=int(f.resource_type_filter),
                resource_name=f.resource_name_filter,
                pattern_type=_pattern(f, "pattern_type_filter"),
                principal=f.principal_filter,
                host=f.host_filter,
                operation=int(f.operation),
                permission_type=int(f.permission_type),
            )
            for f in request.body.filters
        ]
        controller = self.service.controller
        results = await self.service.submit(
            lambda image: controller.delete_acls(image, filters),
            principal=session.principal,
        )
        removed = {b: None for r in results for b in r.matching}
        self._log_change(session.principal, "delete acl", ((bindingecho(b), 0) for b in removed))
        return self._answer(
            request,
            throttle_time=0,
            filter_results=[
                {
                    "error_code": int(r.outcome.error_code),
                    "error_message": r.outcome.error_message,
                    "matching_acls": [
                        {
                            "error_code": 0,
                            "error_message": None,
                            "resource_type": int(b.resource_type),
                            "resource_name": b.resource_name,
                            "pattern_type": int(b.pattern_type),
                            "principal": b.principal,
                            "host": b.host,
                            "operation": int(b.operation),
                            "permission_type": int(b.permission_type),
                        }
                        for b in r.matching
                    ],
                }
                for r in results
            ],
        )
