"""The parity plot: exact zeros drawn as such, the two curves told apart, legends off the curves."""

import pytest
from matplotlib import pyplot as plt

from portlayer.train.compare import compare_runs
from portlayer.train.plot import ERROR_FLOOR, build_figure


@pytest.fixture
def figure_of(make_run):
    figures = []

    def draw(run, names=("gpt2-tiny.cpu-cpu.json", "run.json")):
        baseline = make_run(created="2026-11-23T11:51:49+00:00")
        figure = build_figure(compare_runs(baseline, run), names)
        figures.append(figure)
        figure.canvas.draw()
        return figure

    yield draw
    for figure in figures:
        plt.close(figure)


def _line(axes, label_start):
    return next(line for line in axes.get_lines() if line.get_label().startswith(label_start))


def test_identical_steps_are_markers_on_a_zero_floor_never_joined_to_the_others(make_run, perturbed, figure_of):
    run = perturbed(make_run(), {2: 3e-8, 5: 1e-7})  # steps 1, 3, 4, 6 identical
    relative = figure_of(run).axes[1]
    errors = _line(relative, "|run - baseline|")
    assert errors.get_linestyle() == "None"  # markers only: no zig-zag through the floor
    assert list(errors.get_xdata()) == [2, 5]
    zeros = _line(relative, "identical loss")
    assert list(zeros.get_xdata()) == [1, 3, 4, 6] and set(zeros.get_ydata()) == {ERROR_FLOOR}
    assert zeros.get_label() == "identical loss (error 0): 4 of 6 steps"
    labels = {tick.get_text() for tick, value in zip(relative.get_yticklabels(), relative.get_yticks())
              if value == ERROR_FLOOR}
    assert labels == {"0"}


def test_the_legend_names_each_file_and_its_date(make_run, figure_of):
    run = make_run(created="2026-11-24T09:00:00+00:00")
    texts = [text.get_text() for text in figure_of(run).axes[0].get_legend().get_texts()]
    assert texts == [
        "baseline gpt2-tiny.cpu-cpu.json, 2026-11-23: cpu x2 (x86_64 cpu)",
        "run run.json, 2026-11-24: cpu x2 (x86_64 cpu)",
    ]


def test_legends_sit_beside_the_axes_not_over_a_diverged_curve(make_run, perturbed, figure_of):
    figure = figure_of(perturbed(make_run(), {3: 0.05, 4: 0.2, 5: 0.4, 6: 0.6}))
    renderer = figure.canvas.get_renderer()
    for axes in figure.axes:
        legend, plot_area = axes.get_legend().get_window_extent(renderer), axes.get_window_extent(renderer)
        assert legend.x0 >= plot_area.x1
