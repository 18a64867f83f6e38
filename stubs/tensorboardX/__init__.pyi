# The part of tensorboardX (untyped) that rxrl uses: `rxrl train` writes scalars.
from typing import Any

class SummaryWriter:
    def __init__(self, logdir: str | None = None, comment: str | None = "",
                 purge_step: int | None = None, max_queue: int | None = 10,
                 flush_secs: int | None = 120, filename_suffix: str | None = "",
                 write_to_disk: bool | None = True, log_dir: str | None = None,
                 **kwargs: Any) -> None: ...
    def add_scalar(self, tag: str, scalar_value: float, global_step: int | None = None,
                   walltime: float | None = None, display_name: str | None = "",
                   summary_description: str | None = "") -> None: ...
    def flush(self) -> None: ...
    def close(self) -> None: ...
