"""The bytes each collective puts on each link (communication_matrix.json), per HCCL's ring algorithms, and
the group hash msprof-analyze matches operator names with."""

import pytest

from torch_npu.profiler.communication import communication_tables, group_hash, links


def record(kind, rank=1, size=4, nbytes=4096, peer=-1):
    return {"kind": kind, "rank": rank, "size": size, "bytes": nbytes, "peer": peer}


@pytest.mark.parametrize(
    "kind,peer,expected",
    [
        ("allreduce", -1, {(1, 2): 6144}),  # 2(n-1)/n of the tensor to the next rank
        ("allgather", -1, {(1, 2): 12288}),  # (n-1) chunks
        ("reduce_scatter", -1, {(1, 2): 12288}),
        ("broadcast", 1, {(1, 0): 4096, (1, 2): 4096, (1, 3): 4096}),  # from the root
        ("broadcast", 0, {}),
        ("scatter", 1, {(1, 0): 4096, (1, 2): 4096, (1, 3): 4096}),
        ("reduce", 0, {(1, 0): 4096}),  # into the root
        ("gather", 1, {}),
        ("all_to_all", -1, {(1, 0): 1024, (1, 2): 1024, (1, 3): 1024}),
        ("send", 3, {(1, 3): 4096}),
        ("recv", 0, {}),  # the sender reports the link
        ("barrier", -1, {}),
    ],
)
def test_links_follow_hccls_algorithms(kind, peer, expected):
    assert links(record(kind, peer=peer)) == expected


def test_a_two_rank_allreduce_moves_its_size_each_way():
    assert links(record("allreduce", rank=0, size=2)) == {(0, 1): 4096}
    assert links(record("allreduce", rank=1, size=2)) == {(1, 0): 4096}


def test_group_hash_is_msprof_analyzes_double_hash():
    from msprof_analyze.cluster_analyse.recipes.hccl_sum.hccl_sum import double_hash

    for name in ("hccl_0", "hccl_1", "10.0.0.1%eth0_60000_0_1700000000000"):
        assert group_hash(name) == str(double_hash(name))


def test_communication_tables_split_steps_and_kinds():
    base = {"rank": 0, "size": 2, "peer": -1, "device": 0, "group": "hccl_0", "dtype": "Float", "count": 1024}
    session = {
        "has_steps": True,
        "steps": [(1, 0, 1_000_000), (2, 1_000_000, 2_000_000)],
        "activities": [],
        "epoch_offset_ns": 0,
        "collectives": [
            dict(base, name="hcom_allReduce__0_0_1", kind="allreduce", bytes=4096, start_ns=10, end_ns=200_010),
            dict(base, name="hcom_send__1_0_1", kind="send", peer=1, bytes=512, start_ns=1_000_100, end_ns=1_100_100),
        ],
    }
    comm, matrix = communication_tables(session)
    key = "@" + group_hash("hccl_0")
    info = comm["step1"]["collective"]["hcom_allReduce__0_0_1" + key]["Communication Time Info"]
    assert info["Elapse Time(ms)"] == pytest.approx(0.2)
    assert info["Transit Time(ms)"] + info["Wait Time(ms)"] == pytest.approx(0.2)
    assert comm["step1"]["collective"]["Total Op Info"]["Communication Time Info"]["Elapse Time(ms)"] == pytest.approx(
        0.2
    )
    assert matrix["step2"]["p2p"]["hcom_send__1_0_1" + key]["0-1"]["Transit Size(MB)"] * 2**20 == 512
    assert communication_tables(dict(session, collectives=[])) is None
