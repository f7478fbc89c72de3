"""Parameters and FLOPs of backbone presets (or config backbones) at several resolutions.

FLOPs come from :func:`mmlinear.apis.count_flops`: ``torch.utils.flop_counter`` on a fake
input (matmuls and convolutions, two FLOPs per multiply-add; norms, activations, softmax and
interpolation are not counted, the convention of the reference numbers below), so 9216 x 9216
costs as little as 224 x 224.

Beside the FLOPs, the attention interactions per layer: the query-key pairs one head scores
on one image (``backbone.attention_interactions``), against the ``(N + 1)^2`` of a dense ViT
with one class token on the same N patches. VECA runs at every core budget of
``--active-cores`` (its interactions are ``2 N K + K^2``, so at 512 px, N = 1024 and K = 64 it
scores 87.1 % fewer than the dense ViT).

With ``--block I``, also the FLOPs of block I alone and of its attention, counted within the
same forward pass (:func:`mmlinear.apis.count_block_flops`), in a second table: VECA-B's
core-periphery block against a softmax ViT-B block of the same width, over resolution.

Prints and writes (``--out``, markdown) a table beside the numbers the papers state or that
were counted on the official code (``REFERENCE_NUMBERS``), and a JSON file next to it.

Examples:
    python tools/analysis_tools/get_flops.py --models infvit-4l-linear infvit-4l-softmax \\
        weightformer-t deit-t-sdpa --resolutions 224 512 1024 --out work_dirs/flops/flops.md
    python tools/analysis_tools/get_flops.py --models veca-base --resolutions 512 \\
        --active-cores 8 16 32 64
    python tools/analysis_tools/get_flops.py --models veca-base vit-b-sdpa \\
        --resolutions 256 384 512 768 1024 --block 0
"""
import argparse
import json
import os
import os.path as osp
from typing import Dict, List, Optional, Sequence, Tuple

from mmlinear.apis import (build_backbone, count_attention_interactions, count_block_flops,
                           count_flops, count_params, count_patch_tokens)
from mmlinear.utils.progress import ProgressETA

# (preset, resolution) -> (value, unit, source). Sources: 'paper' (stated in the paper; params
# of the full classifier with its 1000-class head), 'ref. code' (counted on the official code
# with the same counter; params of the backbone) and 'analytic' (summed by hand over the
# matmul and convolution shapes of the architecture, for resolutions no source states).
REFERENCE_NUMBERS: Dict[Tuple[str, int], List[Tuple[float, str, str]]] = {
    ('infvit-4l-linear', 224): [(53.5, 'M params', 'paper'), (59, 'GFLOPs', 'paper')],
    ('infvit-4l-pure', 224): [(57.7, 'M params', 'paper'), (59, 'GFLOPs', 'paper')],
    ('infvit-4l-softmax', 224): [(57.7, 'M params', 'paper'), (17.5, 'GFLOPs', 'paper')],
    ('infvit-24l-pure', 224): [(330.6, 'M params', 'paper')],
    ('weightformer-t', 224): [(6.881184, 'M params (backbone)', 'ref. code'),
                              (1.124, 'GMACs', 'ref. code')],
    ('weightformer-t', 512): [(5.86, 'GMACs', 'analytic')],
    ('weightformer-t', 1248): [(34.78, 'GMACs', 'analytic')],
    ('weightformer-s', 224): [(27.107136, 'M params (backbone)', 'ref. code'),
                              (4.428, 'GMACs', 'ref. code')],
    ('weightformer-b', 448): [(17.663, 'GMACs', 'ref. code')],
    ('deit-t-sdpa', 224): [(1.25, 'GMACs', 'analytic')],
    ('deit-t-sdpa', 512): [(10.43, 'GMACs', 'analytic')],
    ('deit-t-sdpa', 1248): [(203.82, 'GMACs', 'analytic')],
    ('deit-s-sdpa', 224): [(4.60, 'GMACs', 'analytic')],
    ('veca-small', 256): [(21.628961, 'M params (backbone)', 'ref. code'),
                          (13.74, 'GFLOPs', 'ref. code')],
    ('veca-small', 512): [(46.81, 'GFLOPs', 'ref. code')],
    ('veca-small', 1024): [(179.08, 'GFLOPs', 'ref. code')],
    ('veca-base', 256): [(85.725089, 'M params (backbone)', 'ref. code'),
                         (54.66, 'GFLOPs', 'ref. code')],
    ('veca-base', 512): [(186.03, 'GFLOPs', 'ref. code')],
    ('veca-base', 1024): [(711.49, 'GFLOPs', 'ref. code')],
    ('veca-large', 256): [(303.195301, 'M params (backbone)', 'ref. code'),
                          (193.65, 'GFLOPs', 'ref. code')],
}


def reference_text(model: str, resolution: int) -> str:
    """The reference numbers of a preset and resolution, as table text ('-' without any)."""
    entries = REFERENCE_NUMBERS.get((model, resolution), [])
    return '; '.join(f'{value:g} {unit} ({source})' for value, unit, source in entries) or '-'


def dense_interactions(num_patches: int) -> int:
    """Query-key pairs per head of a dense ViT with one class token on ``num_patches``."""
    return (num_patches + 1)**2


def interaction_text(per_layer: Sequence[int]) -> str:
    """Per-layer interactions as table text: one number when every layer has it."""
    return ' / '.join(f'{count:,}' for count in dict.fromkeys(per_layer))


def measure(models: Sequence[str],
            resolutions: Sequence[int],
            active_cores: Optional[Sequence[int]] = None,
            block: Optional[int] = None) -> List[dict]:
    """Params, FLOPs and attention interactions of every model at every resolution (and,
    for backbones with a core budget, every budget of ``active_cores``), with the
    reference numbers; with ``block``, also the FLOPs of that block and of its attention
    (``block_flops``, ``block_attention_flops``) and the tokens it sees (``block_tokens``).

    Raises:
        ValueError: An unknown preset, a budget the backbone does not accept, or a block it
            does not have.
    """
    backbones = {name: build_backbone(name) for name in models}
    # The reference numbers were counted at each backbone's own budget.
    default_budgets = {
        name: getattr(model, 'active_cores', None)
        for name, model in backbones.items()
    }
    if active_cores and all(budget is None for budget in default_budgets.values()):
        raise ValueError(f'--active-cores applies to backbones with a core budget (VECA); '
                         f'none of {list(models)} has one')
    budgets = {
        name: [None] if default is None else list(active_cores or [default])
        for name, default in default_budgets.items()
    }
    rows = []
    progress = ProgressETA(sum(len(b) for b in budgets.values()) * len(resolutions))
    for name, model in backbones.items():
        model.eval()  # some backbones' train() returns None, so no chaining
        params = count_params(model)
        for budget in budgets[name]:
            if budget is not None:
                # Checked by the setter; the counts and forward below all use the default.
                model.active_cores = budget
            for resolution in resolutions:
                per_layer = count_attention_interactions(model, resolution)
                num_patches = count_patch_tokens(model, resolution)
                flops = count_flops(model, resolution)
                row = dict(
                    model=name,
                    resolution=resolution,
                    active_cores=budget,
                    tokens=num_patches,
                    params=params,
                    flops=flops,
                    interactions_per_layer=per_layer,
                    dense_vit_interactions=dense_interactions(num_patches),
                    reference=(reference_text(name, resolution)
                               if budget == default_budgets[name] else '-'))
                if block is not None:
                    block_flops, attention_flops = count_block_flops(model, resolution, block)
                    row.update(
                        block=block,
                        block_tokens=num_patches + model.num_extra_tokens,
                        block_flops=block_flops,
                        block_attention_flops=attention_flops)
                rows.append(row)
                budget_text = '' if budget is None else f' K={budget}'
                progress.step(f'{name}{budget_text} {resolution}px: {params / 1e6:.2f} M params, '
                              f'{flops / 1e9:.2f} GFLOPs')
    return rows


def markdown_table(rows: List[dict]) -> str:
    """A markdown table of the measured numbers beside the reference ones."""
    lines = [
        '| model | resolution | cores K | patch tokens | params (M, backbone) | GFLOPs | GMACs | '
        'interactions / layer | fewer than a dense ViT | paper / reference |',
        '|---|---|---|---|---|---|---|---|---|---|'
    ]
    for r in rows:
        per_layer = r['interactions_per_layer']
        counts, saving = '-', '-'
        if per_layer is not None:
            counts = interaction_text(per_layer)
            saving = f'{100 * (1 - max(per_layer) / r["dense_vit_interactions"]):.1f} %'
        lines.append(f'| {r["model"]} | {r["resolution"]} | {r["active_cores"] or "-"} | '
                     f'{r["tokens"]:,} | {r["params"] / 1e6:.2f} | {r["flops"] / 1e9:,.2f} | '
                     f'{r["flops"] / 2e9:,.2f} | {counts} | {saving} | {r["reference"]} |')
    return '\n'.join(lines) + '\n'


def block_table(rows: List[dict]) -> str:
    """A markdown table of one block's FLOPs and its attention's, per model and resolution
    (the rows of :func:`measure` with ``block``)."""
    lines = [
        f'| model | resolution | cores K | tokens (patches + extra) | block {rows[0]["block"]} '
        'GFLOPs | its attention GFLOPs |', '|---|---|---|---|---|---|'
    ]
    for r in rows:
        attention = r['block_attention_flops']
        attention_text = '-' if attention is None else f'{attention / 1e9:,.3f}'
        lines.append(f'| {r["model"]} | {r["resolution"]} | {r["active_cores"] or "-"} | '
                     f'{r["block_tokens"]:,} | {r["block_flops"] / 1e9:,.3f} | '
                     f'{attention_text} |')
    return '\n'.join(lines) + '\n'


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument(
        '--models',
        nargs='+',
        default=[
            'infvit-4l-linear', 'infvit-4l-pure', 'infvit-4l-softmax', 'vit-4l-sdpa',
            'weightformer-t', 'deit-t-sdpa'
        ],
        help='presets of mmlinear.apis.BACKBONE_PRESETS or config files')
    parser.add_argument('--resolutions', nargs='+', type=int, default=[224, 512, 1024])
    parser.add_argument(
        '--active-cores',
        nargs='+',
        type=int,
        default=None,
        help='core budgets K (8, 16, ..., 64) at which the backbones with a core budget '
        '(VECA) are counted; defaults to each model\'s own budget')
    parser.add_argument(
        '--out',
        default=None,
        help='markdown file to write (a .json with the raw numbers goes '
        'beside it)')
    parser.add_argument(
        '--block',
        type=int,
        default=None,
        help='also count this block (0 is the first) alone and its attention, in a second '
        'table')
    args = parser.parse_args(argv)
    if min(args.resolutions) < 16:
        raise SystemExit('--resolutions must be >= 16 (one patch)')
    return args


def main(argv: Optional[Sequence[str]] = None) -> None:
    args = parse_args(argv)
    from mmengine.logging import MMLogger
    MMLogger.get_instance('mmlinear_get_flops', log_level='WARNING')
    try:
        rows = measure(args.models, args.resolutions, args.active_cores, args.block)
    except ValueError as error:
        raise SystemExit(str(error))
    table = markdown_table(rows)
    if args.block is not None:
        table += '\n' + block_table(rows)
    print(table)
    if args.out:
        os.makedirs(osp.dirname(osp.abspath(args.out)), exist_ok=True)
        with open(args.out, 'w') as f:
            f.write(table)
        with open(osp.splitext(args.out)[0] + '.json', 'w') as f:
            json.dump(rows, f, indent=1)
        print(f'wrote {args.out}')


if __name__ == '__main__':
    main()
