from tests.navi.replay.conftest import store, store_kind

__all__ = ["store", "store_kind"]
