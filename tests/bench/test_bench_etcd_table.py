import asyncio

import grpc
import pytest

from coord.bench import bench_auth
from coord.bench.etcd import OWN_ALL_TIMES, comparison_table, cost_table, own_all, table
from coord.bench.round_table import round_table
from coord.etcdpb import rpc_pb2 as epb
from coord.etcdpb import rpc_pb2_grpc as erpc
from coord.progress_bars import Phases
from coord.testing import LocalCluster
from coord.v1 import coord_pb2, coord_pb2_grpc


def _row(system: str, api: str, op: str, clients: int, per_s: float) -> dict:
    return {"system": system, "api": api, "op": op, "clients": clients, "per_s": per_s,
            "p50_ms": 1.0, "p99_ms": 2.0}


def _ratio(row: list[str]) -> str:
    """The coord/etcd column (before the two CPU columns and the snapshots)."""
    return row[-4]


def _cpu(row: list[str]) -> list[str]:
    """The two CPU columns: coord's (or the floor's) and etcd's."""
    return row[-3:-1]


def test_table_pairs_coord_with_etcd_by_op_and_clients():
    rows = [
        _row("etcd", "etcd", "put", 16, 3000.0),
        _row("coord", "etcd", "put", 16, 1500.0),
        _row("coord", "native", "put", 16, 1200.0),
        _row("coord", "etcd", "claim", 64, 900.0),  # no etcd figure for it
    ]
    made = comparison_table(rows)
    lines = made.rows
    assert "coord/etcd" in made.headers
    assert len(lines) == 3  # coord rows only
    assert lines[0][:3] == ["put", "etcd", "16"] and _ratio(lines[0]) == "0.50"
    assert lines[1][:2] == ["put", "native"] and _ratio(lines[1]) == "0.40"
    assert _ratio(lines[2]) == "-"


def test_stream_rows_sit_beside_the_etcd_api_rows_of_their_op_and_clients():
    rows = [
        _row("etcd", "etcd", "put", 64, 4000.0),
        _row("etcd", "etcd", "claim", 64, 2000.0),
        _row("coord", "etcd", "put", 64, 1000.0),
        _row("coord", "etcd", "claim", 64, 800.0),
        _row("coord", "native", "put", 64, 1200.0),
        _row("coord", "stream", "put", 64, 5000.0),
        _row("coord", "stream", "claim", 64, 3000.0),
    ]
    lines = comparison_table(rows).rows
    assert [line[:3] for line in lines] == [
        ["put", "etcd", "64"], ["put", "native", "64"], ["put", "stream", "64"],
        ["claim", "etcd", "64"], ["claim", "stream", "64"]]
    assert _ratio(lines[2]) == "1.25" and _ratio(lines[4]) == "1.50"


def test_cpu_per_op_sits_beside_each_row_for_both_systems():
    cpu = {"cpu_us_per_op": {"leader": 150.4, "follower": 60.6}}
    rows = [{**_row("etcd", "etcd", "put", 64, 4000.0), "cpu_us_per_op":
             {"leader": 90.0, "follower": 40.0}},
            {**_row("coord", "stream", "put", 64, 5000.0), **cpu},
            _row("coord", "native", "put", 64, 1000.0)]  # measured without a meter
    made = comparison_table(rows)
    lines = made.rows
    assert "CPU us/op leader/follower: coord" in made.headers
    assert _cpu(lines[0]) == ["-", "90/40"]
    assert _cpu(lines[1]) == ["150/61", "90/40"]


def test_the_grpc_floor_sits_last_in_its_op_and_clients_with_its_ratio_to_etcd():
    rows = [
        _row("etcd", "etcd", "get", 64, 12000.0),
        {**_row("floor", "etcd", "get", 64, 8400.0), "cpu_us_per_op": {"leader": 130.2}},
        _row("coord", "etcd", "get", 64, 3000.0),
        _row("coord", "stream", "get", 64, 20000.0),
    ]
    lines = comparison_table(rows).rows
    assert [line[:3] for line in lines] == [
        ["get", "etcd", "64"], ["get", "stream", "64"], ["get", "floor", "64"]]
    assert _ratio(lines[2]) == "0.70"
    assert _cpu(lines[2]) == ["130", "-"]  # one process: no follower figure


def test_the_snapshots_coords_members_took_during_a_row_end_it():
    rows = [
        _row("etcd", "etcd", "put", 64, 4000.0),
        {**_row("coord", "stream", "put", 64, 3000.0),
         "snapshots": {"count": 3, "seconds": 0.914}},
        {**_row("coord", "etcd", "put", 64, 1000.0), "snapshots": {"count": 0, "seconds": 0}},
        _row("floor", "etcd", "put", 64, 8000.0),  # not coord: nothing counted
    ]
    made = comparison_table(rows)
    assert made.headers[-1] == "snapshots"
    assert [line[1] for line in made.rows] == ["etcd", "stream", "floor"]
    assert [line[-1] for line in made.rows] == ["0", "3/0.91s", "-"]


def test_the_cost_table_sets_each_variant_beside_plaintext_with_the_ratio():
    rows = [{**_row("coord", "etcd", "put", 64, 1000.0), "variant": "plain"},
            {**_row("coord", "etcd", "put", 64, 800.0), "variant": "tls"},
            {**_row("coord", "etcd", "put", 64, 900.0), "variant": "auth"},
            {**_row("coord", "stream", "get", 1, 500.0), "variant": "plain"},
            {**_row("coord", "stream", "get", 1, 250.0), "variant": "tls"},
            {**_row("etcd", "etcd", "put", 64, 4000.0), "variant": "plain"}]  # not coord
    made = cost_table(rows, ["plain", "tls", "auth"])
    assert "tls/plain" in made.headers and "auth/plain" in made.headers
    lines = made.rows
    assert [line[:3] for line in lines] == [["put", "etcd", "64"], ["get", "stream", "1"]]
    assert lines[0][7] == "0.80" and lines[0][-1] == "0.90"
    assert lines[1][7] == "0.50" and lines[1][-1] == "-"  # no auth row


def test_round_table_gives_each_role_its_counts_and_cpu_ratios():
    def metered(system: str, api: str, cpu: dict, counts: dict) -> dict:
        return {**_row(system, api, "put", 1, 1000.0), "cpu_us_per_op": cpu,
                "counts_per_op": counts}

    rows = [
        metered("etcd", "etcd", {"leader": 400.0, "follower": 200.0},
                {"leader": {"vcsw": 10.0}, "follower": {"vcsw": 5.0}}),
        metered("coord", "etcd", {"leader": 1200.0, "follower": 600.0},
                {"leader": {"vcsw": 16.0, "readies": 2.0},
                 "follower": {"vcsw": 8.0, "readies": 2.0}}),
        metered("floor", "etcd", {"leader": 300.0}, {"leader": {"vcsw": 10.0}}),
    ]
    made = round_table(rows)
    assert "readies" in made.headers and "/floor" in made.headers
    lines = made.rows
    coord_leader = next(ln for ln in lines if ln[0] == "coord" and ln[4] == "leader")
    coord_follower = next(ln for ln in lines if ln[0] == "coord" and ln[4] == "follower")
    # CPU, then its ratio to the floor's (one process: its "leader") and to etcd's same role
    assert coord_leader[5:8] == ["1200", "4.00", "3.00"]
    assert coord_follower[5:8] == ["600", "2.00", "3.00"]
    assert "16.00" in coord_leader and "2.00" in coord_leader
    etcd_leader = next(ln for ln in lines if ln[0] == "etcd")
    assert etcd_leader[6:8] == ["1.33", "-"] and "-" in etcd_leader[8:]  # no round counts


@pytest.mark.cluster
def test_the_one_request_own_row_is_served_as_the_bench_user_and_fits_the_tables(tmp_path):
    """`ownall` as `--auth` runs it: the bench user's grants cover its sessions and
    groups (a refusal would end the benchmark), and its row sits in both tables."""
    with LocalCluster(1, data_dir=tmp_path / "c") as c:
        leader = c.members[c.wait_for_leader()].listen
        bench_auth.enable_auth(leader)
        token = bench_auth.log_in(leader)

        async def run() -> dict:
            async with bench_auth.token_channel(leader, token) as channel:
                return await own_all(channel, 200, Phases())

        row = asyncio.run(run())
        with grpc.insecure_channel(leader) as ch:
            root = erpc.AuthStub(ch).Authenticate(epb.AuthenticateRequest(
                name="root", password="root-password"), timeout=10).token
            owners = coord_pb2_grpc.OwnershipStub(ch).ListOwners(
                coord_pb2.ListOwnersRequest(group="claims-all-0"), timeout=10,
                metadata=(("token", root),))
    assert len(owners.owners) == 200
    assert (row["op"], row["ops"], row["resources"]) == ("ownall", OWN_ALL_TIMES, 200)
    assert row["per_s"] > 0 and row["p99_ms"] >= row["p50_ms"] > 0
    rows = [{**row, "system": "coord", "api": "native", "variant": "plain"},
            {**row, "system": "coord", "api": "native", "variant": "auth",
             "per_s": row["per_s"] / 2}]
    assert table({"rows": rows[:1]})[0].rows[0][:3] == ["ownall", "native", "1"]
    assert cost_table(rows, ["plain", "auth"]).rows[0][-1] == "0.50"
