"""Dask connection shared by the benchmark harness and the memetic islands."""
from __future__ import annotations

from typing import Any

from geotrain_opt.errors import SolverError


def dask_client(address: str | None, workers: int, timeout_s: float = 10.0) -> tuple[Any, Any]:
    """(client, cluster): a local cluster of ``workers`` processes for ``None``/``"local"``,
    else a client of the scheduler at ``address`` (cluster ``None``). Failure is one line."""
    try:
        from dask.distributed import Client, LocalCluster
    except ImportError:
        raise SolverError("--dask: dask is not installed (pip install 'geotrain-opt[dask]')") from None
    cluster = None
    try:
        if address in (None, "local"):
            cluster = LocalCluster(n_workers=max(1, workers), threads_per_worker=1, processes=True,
                                   dashboard_address=None)
            return Client(cluster), cluster
        return Client(address, timeout=timeout_s), None
    except Exception as e:     # dask raises OSError, TimeoutError, ValueError… for bad addresses
        if cluster is not None:
            cluster.close()
        raise SolverError(f"--dask: cannot connect to {address!r}: {str(e).splitlines()[0] if str(e) else type(e).__name__}") from None


def worker_guard() -> None:
    """Initializer of every local worker process: the parent alone handles Ctrl-C
    (it keeps the best plan and shuts the pool down), and a worker whose parent
    died (SIGKILL, OOM killer) exits instead of lingering as an orphan."""
    import os
    import signal
    import threading
    import time

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    parent = os.getppid()
    try:                                   # Linux: the kernel signals us when the parent dies
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGTERM))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass

    def watch() -> None:                   # everywhere else (and a race before prctl): poll
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(1)

    threading.Thread(target=watch, name="orphan-guard", daemon=True).start()
