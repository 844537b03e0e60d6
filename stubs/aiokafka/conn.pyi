# Below aiokafka's public API: adapters/kafka/wire.py only.
from collections.abc import Callable
from typing import Any

from aiokafka.abc import AbstractTokenProvider

class OAuthAuthenticator:
    _sasl_oauth_token_provider: AbstractTokenProvider
    _token_sent: bool
    def __init__(self, *, sasl_oauth_token_provider: AbstractTokenProvider) -> None: ...
    async def step(self, payload: bytes | None) -> tuple[bytes, bool] | None: ...

class AIOKafkaConnection:
    _sasl_oauth_token_provider: AbstractTokenProvider
    authenticator_oauth: Callable[[AIOKafkaConnection], OAuthAuthenticator]
    def connected(self) -> bool: ...
    def close(self, reason: int | None = ..., exc: BaseException | None = ...) -> None: ...
    async def send(self, request: Any, expect_response: bool = ...) -> Any: ...

async def create_conn(host: str, port: int, **options: Any) -> AIOKafkaConnection: ...
