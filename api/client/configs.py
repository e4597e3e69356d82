"""`AdminClient`'s config APIs: DescribeConfigs, AlterConfigs, IncrementalAlterConfigs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from api.client.apis import ClientApis, outcome
from records.model import ConfigResourceType
from replay.controller.commands import AlterConfig, AlterConfigsResult, ConfigResource


class ConfigApis(ClientApis):
    """Read and change the configs of topics, brokers and the cluster."""

    async def describe_configs(
        self, resources: Sequence[ConfigResource], *, include_synonyms: bool = False
    ) -> Any:
        """DescribeConfigs (kio response entity)."""
        return await self.request(
            32,
            resources=[
                {"resource_type": int(r.type), "resource_name": r.name, "configuration_keys": None}
                for r in resources
            ],
            include_synonyms=include_synonyms,
            include_documentation=False,
        )

    async def alter_configs(
        self,
        resource: ConfigResource,
        values: dict[str, str | None],
        *,
        validate_only: bool = False,
    ) -> Any:
        """AlterConfigs (legacy: replaces every override of the resource; kio entity)."""
        return await self.write(
            33,
            resources=[
                {
                    "resource_type": int(resource.type),
                    "resource_name": resource.name,
                    "configs": [{"name": k, "value": v} for k, v in values.items()],
                }
            ],
            validate_only=validate_only,
        )

    async def incremental_alter_configs(
        self,
        changes: Sequence[tuple[ConfigResource, Sequence[AlterConfig]]],
        *,
        validate_only: bool = False,
    ) -> list[AlterConfigsResult]:
        """IncrementalAlterConfigs: set, delete, append, subtract; one result per resource."""
        response = await self.write(
            44,
            resources=[
                {
                    "resource_type": int(resource.type),
                    "resource_name": resource.name,
                    "configs": [
                        {"name": o.name, "config_operation": int(o.op), "value": o.value}
                        for o in ops
                    ],
                }
                for resource, ops in changes
            ],
            validate_only=validate_only,
        )
        return [
            AlterConfigsResult(
                resource=ConfigResource(
                    type=ConfigResourceType(int(r.resource_type)), name=r.resource_name
                ),
                outcome=outcome(r.error_code, r.error_message),
            )
            for r in response.responses
        ]
