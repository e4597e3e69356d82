"""The Kafka wire protocol, sans-IO: bytes in, requests out; responses in, bytes out.

`codec` turns frames into requests and answers into frames (through `kio`'s schemas, read and
written by code generated per class: `generated_reader` / `generated_writer`); `connection`
splits a byte stream into frames and decodes them; `private` and `avro_bind` are our own APIs'
Avro bodies. No module here opens a socket: `api.server` and `api.client` are the asyncio
shells around them.
"""

import importlib
import sys


def _import_kio_without_hypothesis() -> None:
    """Import kio with Hypothesis hidden, unless this process has imported either already.

    kio registers a Hypothesis strategy for each of its types when Hypothesis is installed,
    importing `hypothesis.strategies` as it is imported itself: in a virtualenv with the test
    extras (`make test` installs them into the one `make demo` made) 0.15 s and 7.5 MiB of every
    process that speaks the protocol (`mlog serve`, the console, a CLI call), for strategies
    nothing here draws (the tests build theirs from Kafka's types: `tests/support/
    kio_entities.py`). Hidden from that one import only (`sys.modules[name] = None` makes an
    import fail): anything importing Hypothesis later gets it as usual.
    """
    if "kio" in sys.modules or "hypothesis" in sys.modules:
        return
    sys.modules["hypothesis"] = None  # type: ignore[assignment]  # an import of it fails
    try:
        importlib.import_module("kio.static._phantom")
    except ImportError:  # another kio: it is imported as it is, by what uses it
        pass
    finally:
        del sys.modules["hypothesis"]


_import_kio_without_hypothesis()
