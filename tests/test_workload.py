"""chakra.open (chakra.workload): one way to open a workload: a prefix, a folder, one file or a glob;
tables loaded when asked and kept, a function mapped over the ranks, derived results kept."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import chain, write_allreduce_workload, write_et

import chakra
from chakra.errors import ChakraInputError
from chakra.groups import CommGroups
from chakra.schema.protobuf.et_def_pb2 import COMM_COLL_NODE
from chakra.table import NodeTable
from chakra.workload import Workload, open_workload


def node_count(table: NodeTable) -> int:
    return len(table)


# -- finding a workload ---------------------------------------------------------------------------


def test_a_prefix_opens_every_rank(allreduce_workload: Path):
    workload = chakra.open(allreduce_workload)

    assert Path(workload.prefix) == allreduce_workload
    assert workload.ranks == [0, 1, 2, 3] and len(workload) == 4
    assert workload.files == {r: allreduce_workload.parent / f"workload.{r}.et" for r in range(4)}


def test_a_folder_holding_one_workload_opens_it(allreduce_workload: Path):
    assert Path(open_workload(allreduce_workload.parent).prefix) == allreduce_workload


def test_one_rank_file_opens_that_file_alone(allreduce_workload: Path):
    workload = open_workload(allreduce_workload.parent / "workload.2.et")

    assert workload.ranks == [2] and workload.single_file


def test_one_rank_file_with_whole_opens_its_workload(allreduce_workload: Path):
    workload = open_workload(allreduce_workload.parent / "workload.2.et", whole=True)

    assert Path(workload.prefix) == allreduce_workload
    assert workload.ranks == [0, 1, 2, 3]


def test_a_file_without_a_rank_in_its_name_is_rank_0(tmp_path: Path):
    path = write_et(tmp_path / "trace.et", chain(2))

    assert open_workload(path).files == {0: path}


def test_a_glob_opens_the_rank_files_it_matches(allreduce_workload: Path):
    workload = open_workload(f"{allreduce_workload}.[13].et")

    assert workload.ranks == [1, 3]
    assert Path(workload.prefix) == allreduce_workload


def test_a_glob_over_two_workloads_is_refused(tmp_path: Path):
    write_allreduce_workload(tmp_path, "a", 1)
    write_allreduce_workload(tmp_path, "b", 1)

    with pytest.raises(ChakraInputError, match="not rank files of one workload"):
        open_workload(f"{tmp_path}/*.et")


def test_only_the_ranks_asked_for_are_opened(allreduce_workload: Path):
    assert open_workload(allreduce_workload, ranks=[3, 1]).ranks == [1, 3]


def test_a_rank_the_workload_lacks_is_refused_naming_its_ranks(allreduce_workload: Path):
    with pytest.raises(ChakraInputError, match=r"no rank 7 \(ranks \[0, 1, 2, 3\]\)"):
        open_workload(allreduce_workload, ranks=[7])


def test_compressed_rank_files_are_found(tmp_path: Path):
    prefix = write_allreduce_workload(tmp_path, "zipped", 2, suffix=".et.gz")

    workload = open_workload(prefix)

    assert workload.ranks == [0, 1]
    assert len(workload.trace(1)) == 3


def test_other_workloads_beside_the_prefix_are_not_opened(tmp_path: Path):
    write_allreduce_workload(tmp_path, "llama", 2)
    write_allreduce_workload(tmp_path, "llama2", 3)

    assert len(open_workload(tmp_path / "llama")) == 2
    assert len(open_workload(tmp_path / "llama2")) == 3


def test_a_directory_with_several_workloads_is_refused(tmp_path: Path):
    write_allreduce_workload(tmp_path, "a", 1)
    write_allreduce_workload(tmp_path, "b", 1)

    with pytest.raises(ChakraInputError, match="found: a, b"):
        open_workload(tmp_path)


def test_a_directory_without_a_workload_is_refused(tmp_path: Path):
    (tmp_path / "notes.txt").write_text("x")

    with pytest.raises(ChakraInputError, match="found: none"):
        open_workload(tmp_path)


def test_a_prefix_without_files_is_refused(tmp_path: Path):
    with pytest.raises(ChakraInputError, match="no files"):
        open_workload(tmp_path / "nothing")


def test_a_rank_present_both_plain_and_compressed_is_refused(tmp_path: Path):
    write_allreduce_workload(tmp_path, "w", 2)
    write_et(tmp_path / "w.1.et.gz", chain(1))

    with pytest.raises(ChakraInputError, match="rank 1 exists twice"):
        open_workload(tmp_path / "w")


def test_ranks_sort_numerically(tmp_path: Path):
    for rank in (10, 2, 1):
        write_et(tmp_path / f"w.{rank}.et", chain(rank))

    workload = open_workload(tmp_path / "w")

    assert [(rank, len(workload.trace(rank))) for rank in workload.ranks] == [(1, 1), (2, 2), (10, 10)]


def test_missing_ranks_are_the_gaps_below_the_highest_rank(tmp_path: Path):
    for rank in (0, 2, 5):
        write_et(tmp_path / f"w.{rank}.et", chain(1))

    assert open_workload(tmp_path / "w").missing == (1, 3, 4)


def test_a_complete_workload_has_no_missing_ranks(allreduce_workload: Path):
    assert open_workload(allreduce_workload).missing == ()


def test_the_allreduce_helper_writes_one_collective_per_rank(allreduce_workload: Path):
    workload = open_workload(allreduce_workload)
    for rank in workload.ranks:
        assert [n.type for n in workload.trace(rank).topological_order()].count(COMM_COLL_NODE) == 1


# -- communicator groups --------------------------------------------------------------------------


def test_the_comm_groups_file_beside_the_ranks_is_read_as_comm_groups(tmp_path: Path):
    prefix = write_allreduce_workload(tmp_path, "w", 4, comm_groups={1: [0, 1], 2: [2, 3]})

    workload = open_workload(prefix)

    assert workload.comm_groups == CommGroups({1: (0, 1), 2: (2, 3)})
    assert workload.comm_groups_path == tmp_path / "w.comm_groups.json"


def test_one_rank_file_gets_the_groups_beside_it(tmp_path: Path):
    prefix = write_allreduce_workload(tmp_path, "w", 2, comm_groups={1: [0, 1]})

    assert open_workload(f"{prefix}.1.et").comm_groups == CommGroups({1: (0, 1)})


def test_a_workload_without_a_comm_groups_file_has_none(allreduce_workload: Path):
    assert open_workload(allreduce_workload).comm_groups is None


def test_a_directory_in_place_of_the_comm_groups_file_is_refused(tmp_path: Path):
    write_et(tmp_path / "w.0.et", chain(1))
    (tmp_path / "w.comm_groups.json").mkdir()

    with pytest.raises(ChakraInputError, match="is a directory"):
        open_workload(tmp_path / "w")


# -- loading and querying -------------------------------------------------------------------------


def test_opening_reads_no_table_and_a_table_is_kept_once_loaded(allreduce_workload: Path):
    workload = open_workload(allreduce_workload)
    assert "0 loaded" in repr(workload)

    first = workload.table(2)

    assert workload.table(2) is first
    assert "1 loaded" in repr(workload)


def test_load_loads_every_rank_in_worker_processes(allreduce_workload: Path):
    workload = open_workload(allreduce_workload).load(workers=2)

    assert "4 loaded" in repr(workload)
    assert [table.rank for table in workload.tables.values()] == [0, 1, 2, 3]


def test_map_runs_a_function_on_every_rank_and_keeps_only_its_results(allreduce_workload: Path):
    found = open_workload(allreduce_workload).map(node_count, workers=2)

    assert found.results == {0: 3, 1: 3, 2: 3, 3: 3}
    assert Path(found.prefix) == allreduce_workload


def test_a_derived_result_is_computed_once_per_workload(allreduce_workload: Path):
    workload = open_workload(allreduce_workload)
    calls: list[int] = []

    def compute() -> int:
        calls.append(1)
        return 42

    assert workload.derived("answer", compute) == workload.derived("answer", compute) == 42
    assert len(calls) == 1


def test_a_workload_of_tables_in_memory_answers_like_one_read(allreduce_workload: Path):
    read = open_workload(allreduce_workload)
    built = Workload.of_tables(read.prefix, read.tables)

    assert built.ranks == read.ranks and built.table(1) is read.table(1)
