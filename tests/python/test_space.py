"""Spaces from Python: the same counts, samples, keys and features as `carb space`, as
DataFrames and as numpy arrays."""

import numpy as np
import pandas as pd
import pytest

import carb
from conftest import SPACES, cli_error, cli_json


def assert_frame_matches_cli(frame, rows):
    """Every column and value of `carb ... --format json`'s rows, exactly, in order."""
    assert len(frame) == len(rows)
    assert list(frame.columns) == list(rows[0].keys())
    for column in frame.columns:
        ours = [v.item() if hasattr(v, "item") else v for v in frame[column].astype(object)]
        theirs = [row[column] for row in rows]
        assert ours == theirs, column


def test_a_space_loads_and_counts_as_carb_space_count():
    space = carb.load_space(SPACES / "cpu-demo.yaml")
    [cli] = cli_json("space", "count", "--spec", SPACES / "cpu-demo.yaml", "--format", "json")
    assert space.name == cli["space"] == "cpu-demo"
    assert space.grid_points == cli["grid_points"]
    assert space.count() == cli["points"]
    assert 0 < space.count() < space.grid_points  # max_flops cuts it
    assert space.constraints == {"max_flops": 5e9}
    assert [axis["name"] for axis in space.axes][-2:] == ["batch", "precision"]
    paper = carb.load_space(SPACES / "paper.yaml")
    assert paper.count() == paper.grid_points == 17280


@pytest.mark.parametrize("sampling", ["random", "stratified"])
def test_samples_are_the_command_lines(sampling):
    space = carb.load_space(SPACES / "cpu-demo.yaml")
    rows = cli_json("space", "list", "--spec", SPACES / "cpu-demo.yaml", "--sample", 40,
                    "--seed", 3, "--sampling", sampling, "--format", "json")
    indices = space.sample(40, seed=3, sampling=sampling)
    assert indices.dtype == np.uint64
    assert indices.tolist() == [row["index"] for row in rows]
    assert space.keys(indices) == [row["key"] for row in rows]
    assert_frame_matches_cli(space.list(sample=40, seed=3, sampling=sampling), rows)
    assert space.sample(40, seed=4, sampling=sampling).tolist() != indices.tolist()


def test_features_are_the_command_lines_exactly():
    rows = cli_json("space", "features", "--spec", SPACES / "cpu-demo.yaml", "--sample", 25,
                    "--seed", 7, "--roofline", "67:3350", "--format", "json")
    frame = carb.load_space(SPACES / "cpu-demo.yaml").features(sample=25, seed=7,
                                                                 roofline="67:3350")
    assert_frame_matches_cli(frame, rows)
    assert frame["block"].dtype == "category"
    assert frame["macs"].dtype == np.int64


def test_whole_space_arrays_and_chunks_equal_the_command_lines_features():
    space = carb.load_space(SPACES / "cpu-demo.yaml")  # constrained: chunks skip points
    rows = cli_json("space", "features", "--spec", SPACES / "cpu-demo.yaml", "--format", "json")
    arrays = space.feature_arrays()
    assert len(arrays["index"]) == len(rows) == space.count()
    for column, values in arrays.items():
        if column == "block":
            assert [carb.BLOCKS[c] for c in values] == [row["block"] for row in rows]
        elif column == "precision":
            assert [carb.PRECISIONS[c] for c in values] == [row["precision"] for row in rows]
        else:
            assert values.tolist() == [row[column] for row in rows], column
    chunks = list(space.feature_chunks(chunk_size=1000))
    assert len(chunks) == -(-space.grid_points // 1000)
    for column, values in arrays.items():
        assert np.array_equal(np.concatenate([chunk[column] for chunk in chunks]), values)
    # Given indices, in their order, in chunks of them.
    chosen = arrays["index"][::-7]
    by_index = list(space.feature_chunks(chunk_size=100, indices=chosen, keys=True))
    assert np.array_equal(np.concatenate([c["index"] for c in by_index]), chosen)
    assert sum((c["key"] for c in by_index), []) == space.keys(chosen)


def test_features_of_keys_and_layers_are_carb_space_shows():
    key = "bottleneck50_w1_ds_r224_b1_fp32"
    [cli] = cli_json("space", "show", key, "--roofline", "67:3350", "--format", "json")
    frame = carb.features([key, "basic18_w0.5_nods_r64_b8_fp16"], roofline="67:3350")
    assert_frame_matches_cli(frame.iloc[:1], [cli])
    assert frame["params"].iloc[0] == 25557032
    assert frame["key"].iloc[1] == "basic18_w0.5_nods_r64_b8_fp16"
    assert_frame_matches_cli(carb.layers(key),
                             cli_json("space", "show", key, "--layers", "--format", "json"))
    # A key spelled another way is the canonical one.
    assert carb.features("basic18_w1.0_ds_r64_b1_fp32")["key"][0] == "basic18_w1_ds_r64_b1_fp32"


def test_spaces_from_yaml_text_and_bad_specs(tmp_path):
    text = (SPACES / "paper.yaml").read_text()
    space = carb.Space.from_yaml(text, "paper.yaml")
    assert space.grid_points == 17280 and space.text == text
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nblock: [basic, wide]\ndepth: [18]\n")
    for path in (bad, tmp_path / "missing.yaml"):
        message, code = cli_error("space", "count", "--spec", path)
        with pytest.raises(carb.InputError) as raised:
            carb.load_space(path)
        assert str(raised.value) == message
        assert isinstance(raised.value, ValueError) and code == 2
    with pytest.raises(carb.InputError, match="^sampling 'latin': expected random or stratified$"):
        space.sample(3, sampling="latin")
    with pytest.raises(carb.InputError) as raised:
        space.keys([17280])
    assert raised.value.subject == "indices"


def test_features_of_a_key_that_does_not_parse_is_the_command_lines_error():
    message, _ = cli_error("space", "show", "basic18_w1_ds_r224_b1_fp64")
    with pytest.raises(carb.InputError) as raised:
        carb.features("basic18_w1_ds_r224_b1_fp64")
    assert str(raised.value) == message
    with pytest.raises(carb.InputError):
        carb.features(42)


@pytest.mark.slow
def test_a_million_points_into_numpy():
    space = carb.load_space(SPACES / "million.yaml")
    total = 0
    peak = 0
    for chunk in space.feature_chunks():
        total += len(chunk["index"])
        peak = max(peak, int(chunk["peak_activation_bytes"].max()))
    assert total == space.grid_points == 1399680
    assert peak > 0
