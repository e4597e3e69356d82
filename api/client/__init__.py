"""The asyncio `AdminClient`: every Kafka admin API we serve and our own, over `api.protocol`."""
