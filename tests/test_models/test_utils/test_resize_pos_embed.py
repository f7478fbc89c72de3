"""resize_pos_embed at the table's own grid: the eager shortcut, and the interpolation that
exports run instead, which returns the table exactly."""
import pytest
import torch

from mmlinear.models.utils import resize_pos_embed


def table(grid, channels=96, dtype=torch.float32):
    g = torch.Generator().manual_seed(0)
    return (10 * torch.randn(1, 1 + grid[0] * grid[1], channels, generator=g)).to(dtype)


@pytest.mark.parametrize('dtype', [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize('mode', ['bicubic', 'bilinear', 'nearest'])
@pytest.mark.parametrize('grid', [(8, 8), (16, 16), (6, 5), (1, 4)])
def test_interpolating_to_the_same_grid_returns_the_table_exactly(monkeypatch, dtype, mode, grid):
    # The path of an export (which never takes the shortcut): at the same grid every output
    # position samples a source position exactly, so its weights are one-hot.
    monkeypatch.setattr('mmlinear.models.utils.pos_embed.exporting', lambda: True)
    pos = table(grid, dtype=dtype)
    resized = resize_pos_embed(pos, grid, grid, mode)
    assert resized is not pos
    assert resized.dtype == dtype
    assert torch.equal(resized, pos)


def test_eager_forward_uses_the_table_as_it_is():
    pos = table((8, 8))
    assert resize_pos_embed(pos, (8, 8), (8, 8)) is pos
    assert resize_pos_embed(pos, (8, 8), (8, 12)).shape == (1, 1 + 8 * 12, 96)


def test_export_at_the_tables_grid_keeps_the_grid_symbolic():
    """torch.export traced at the table's own grid: no assertion that the grid equals it."""
    pos = table((8, 8), channels=4)

    class Positions(torch.nn.Module):

        def forward(self, x):
            return resize_pos_embed(pos, (8, 8), tuple(x.shape[-2:]))

    program = torch.export.export(
        Positions(), (torch.zeros(8, 8), ),
        dynamic_shapes=(dict.fromkeys((0, 1), torch.export.Dim.AUTO), ),
        strict=False,
        prefer_deferred_runtime_asserts_over_guards=True)
    asserts = [
        node for node in program.graph.nodes if node.target is torch.ops.aten._assert_scalar.default
    ]
    assert not asserts, [node.args for node in asserts]
    torch.testing.assert_close(program.module()(torch.zeros(8, 8)), pos)
    torch.testing.assert_close(program.module()(torch.zeros(5, 11)),
                               resize_pos_embed(pos, (8, 8), (5, 11)))
