"""The suite's garbage collection: what collection made (this module's objects among them) is frozen out of the
collector's generations, what a test makes is not, so a full collection only scans the tests' objects."""

import gc

MADE_AT_COLLECTION = [object()]  # a list, tracked by the collector


def _tracked(obj):
    return any(o is obj for o in gc.get_objects())


def test_objects_made_at_collection_are_frozen():
    assert not _tracked(MADE_AT_COLLECTION)
    assert gc.get_freeze_count() > 100_000


def test_objects_a_test_makes_are_collected():
    made_here = [object()]
    assert _tracked(made_here)
    cycle = []
    cycle.append(cycle)  # garbage only a collection frees
    del cycle
    assert gc.collect() >= 1
