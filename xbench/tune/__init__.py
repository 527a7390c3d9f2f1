"""The auto-tuner: search spaces from schedule knobs, strategies, and the persistent tuning database."""
from .db import TuningDB, tuning_db
from .tuner import TuneResult, tune

__all__ = ["TuneResult", "TuningDB", "tune", "tuning_db"]
