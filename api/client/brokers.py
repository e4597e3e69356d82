"""`AdminClient`'s broker APIs: DescribeCluster, and our broker registration and sessions."""

from __future__ import annotations

from typing import Any

from api.client.apis import ClientApis
from api.protocol import private
from replay.controller.commands import BrokerAction, BrokerResult, RegisterBroker


class BrokerApis(ClientApis):
    """The cluster's brokers: describe, register, fence and unfence, their sessions."""

    async def describe_cluster(self, *, include_fenced_brokers: bool = False) -> Any:
        """DescribeCluster (kio response entity)."""
        return await self.request(
            60,
            include_cluster_authorized_operations=False,
            endpoint_type=1,
            include_fenced_brokers=include_fenced_brokers,
        )

    async def register_broker(self, request: RegisterBroker) -> BrokerResult:
        """Register a broker (a new incarnation)."""
        result: BrokerResult = await self.call(private.REGISTER_BROKER, request)
        return result

    async def change_broker(self, broker_id: int, action: BrokerAction) -> BrokerResult:
        """Fence, unfence, shut down or unregister a broker."""
        result: BrokerResult = await self.call(
            private.CHANGE_BROKER, private.ChangeBroker(broker_id=broker_id, action=action)
        )
        return result

    async def broker_liveness(self) -> private.BrokerLivenessList:
        """The brokers' sessions as the server knows them (the active controller keeps them)."""
        response: private.BrokerLivenessList = await self.call(
            private.DESCRIBE_BROKER_LIVENESS, private.DescribeBrokerLiveness()
        )
        return response
