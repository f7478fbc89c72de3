"""Does the attention mix tokens? Train each InfViT attention variant on the relational shapes.

The label of the bundled ``relation`` split (do the two discs have the same colour?)
cannot be read from any single patch, and no sum of per-patch features encodes it, so a model
without token mixing (mean-pooled per-token features) stays near chance while working attention
learns it. Every variant gets the same body ('infvit-demo', patch 8,
mean-pooled patch tokens, a linear head), data, schedule and seed; only ``attn_type`` differs.
Besides the InfSA variants and the control (the default), ``--variants`` takes the
efficient-attention baselines of the InfSA paper's comparison ('elu_linear', 'performer',
'linformer', 'nystromformer', 'agent'), with the options of their demo classifiers in
configs/demo.

``--weightformer-dynamic`` trains the demo WeightFormer body instead
(configs/demo/weightformer-demo_shapes-cls.py: 5 blocks, C = 96, patch 8, mean-pooled tokens),
once per dynamic-block frequency of the WeightFormer paper's ablation: 'all', 'every-2',
'every-3' (the released pattern), 'every-4' or 'none'. Its static blocks mix tokens only
through 3 x 3 depthwise convolutions; the dynamic ones also through weights predicted from the
whole image.

Prints the accuracies side by side, and writes ``results.json`` and ``curves.png`` (validation
accuracy per epoch) to ``--out``.

Example:
    python tools/analysis_tools/benchmark_relation.py --data data/shapes/relation
    python tools/analysis_tools/benchmark_relation.py --data data/shapes/relation \
        --weightformer-dynamic all every-2 every-3 every-4 none
"""
import argparse
import json
import os
import os.path as osp
import time
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np
import torch
import torch.nn.functional as F
from mmengine.config import Config
from mmengine.logging import MMLogger
from PIL import Image
from torch import Tensor, nn

from mmlinear.models import InfViT, WeightFormer
from mmlinear.models.backbones.weightformer import DYNAMIC_FREQUENCIES, dynamic_block_indices
from mmlinear.models.layers import ATTN_TYPES

CLASSES = ('same', 'different')
VARIANTS = ('none', 'linear', 'pure', 'softmax')
#: The baselines' options, as in their demo classifiers (configs/demo/infvit-demo-*_shapes-cls.py):
#: the 65 tokens of a 64 x 64 image projected to 16 (Linformer), 16 landmarks (Nystromformer) or
#: 16 agents (Agent Attention).
MIXER_CFGS = {
    'linformer': dict(proj_len=16),
    'nystromformer': dict(num_landmarks=16),
    'agent': dict(num_agents=16)
}
WEIGHTFORMER_DEMO_CONFIG = osp.join(
    osp.dirname(osp.abspath(__file__)), '..', '..', 'configs', 'demo',
    'weightformer-demo_shapes-cls.py')


def load_split(root: str, split: str) -> Tuple[Tensor, Tensor]:
    """Images as a (N, 3, H, W) float tensor in [-1, 1] and labels (N,)."""
    images, labels = [], []
    for label, name in enumerate(CLASSES):
        folder = osp.join(root, split, name)
        if not osp.isdir(folder):
            raise SystemExit(f'{folder} is missing: run python tools/misc/make_tiny_datasets.py')
        for file in sorted(os.listdir(folder)):
            images.append(np.asarray(Image.open(osp.join(folder, file)).convert('RGB')))
            labels.append(label)
    x = torch.from_numpy(np.stack(images)).permute(0, 3, 1, 2).float() / 127.5 - 1
    return x, torch.tensor(labels)


def infvit_body(attn_type: str) -> nn.Module:
    """The 'infvit-demo' body with one attention, mean-pooling its patch tokens."""
    return InfViT(
        arch='infvit-demo',
        attn_type=attn_type,
        img_size=64,
        patch_size=8,
        out_type='avg_featmap',
        mixer_cfg=MIXER_CFGS.get(attn_type))


def weightformer_body(frequency: str) -> nn.Module:
    """The demo WeightFormer's backbone, as its config builds it, with the dynamic blocks of one
    point of the ablation (:data:`DYNAMIC_FREQUENCIES`)."""
    cfg = Config.fromfile(WEIGHTFORMER_DEMO_CONFIG).model.backbone.to_dict()
    cfg.pop('type')
    num_layers = cfg['arch']['num_layers']
    return WeightFormer(**cfg, dynamic_indices=dynamic_block_indices(frequency, num_layers))


class PooledClassifier(nn.Module):
    """A backbone whose output is its mean-pooled tokens ('avg_featmap'), and a linear head.

    Args:
        backbone (nn.Module): The body; its weights are initialised here.
    """

    def __init__(self, backbone: nn.Module) -> None:
        super().__init__()
        self.backbone = backbone
        self.backbone.init_weights()
        self.head = nn.Linear(self.backbone.embed_dims, len(CLASSES))

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.backbone(x)[0])


@torch.no_grad()
def accuracy(model: nn.Module, x: Tensor, y: Tensor, batch: int = 200) -> float:
    model.eval()
    correct = sum(
        int((model(x[i:i + batch]).argmax(1) == y[i:i + batch]).sum())
        for i in range(0, len(x), batch))
    return correct / len(x)


def train_variant(build_body: Callable[[], nn.Module], data: Dict[str, Tuple[Tensor, Tensor]], args,
                  on_epoch) -> Tuple[List[float], int]:
    """Train one variant; returns the validation accuracy after every epoch and the number of
    parameters."""
    torch.manual_seed(args.seed)
    model = PooledClassifier(build_body())
    decay = [p for n, p in model.named_parameters() if p.ndim > 1 and 'pos_embed' not in n]
    no_decay = [p for n, p in model.named_parameters() if p.ndim <= 1 or 'pos_embed' in n]
    optimizer = torch.optim.AdamW(
        [dict(params=decay, weight_decay=0.05),
         dict(params=no_decay, weight_decay=0.)], lr=args.lr)
    x_train, y_train = data['train']
    steps_per_epoch = len(x_train) // args.batch_size
    # Warm-up then cosine, and gradient clipping: without them InfSA trains unstably on this
    # small task (Pure InfSA collapsed near the peak learning rate, Linear-InfSA stalled).
    scheduler = torch.optim.lr_scheduler.OneCycleLR(
        optimizer, max_lr=args.lr, total_steps=args.epochs * steps_per_epoch, pct_start=0.1)
    generator = torch.Generator().manual_seed(args.seed)
    curve = []
    for epoch in range(args.epochs):
        model.train()
        order = torch.randperm(len(x_train), generator=generator)
        for step in range(steps_per_epoch):
            idx = order[step * args.batch_size:(step + 1) * args.batch_size]
            loss = F.cross_entropy(model(x_train[idx]), y_train[idx])
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
        curve.append(accuracy(model, *data['val']))
        on_epoch(epoch, curve[-1])
    return curve, sum(p.numel() for p in model.parameters())


def plot(curves: Dict[str, List[float]], path: str) -> None:
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6, 4))
    for name, curve in curves.items():
        ax.plot(
            range(1,
                  len(curve) + 1), [100 * a for a in curve],
            marker='o',
            ms=3,
            label='no token mixing' if name == 'none' else name)
    ax.axhline(50, color='grey', ls='--', lw=1, label='chance')
    ax.set_xlabel('epoch')
    ax.set_ylabel('validation top-1 (%)')
    ax.set_title('Relational shapes: do the two discs have the same colour?')
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--data', default='data/shapes/relation')
    parser.add_argument('--out', default='work_dirs/benchmark_relation')
    bodies = parser.add_mutually_exclusive_group()
    bodies.add_argument(
        '--variants',
        nargs='+',
        default=list(VARIANTS),
        choices=ATTN_TYPES,
        help='InfViT attention types, one run each')
    bodies.add_argument(
        '--weightformer-dynamic',
        nargs='+',
        choices=DYNAMIC_FREQUENCIES,
        help='train the demo WeightFormer once per dynamic-block frequency instead')
    parser.add_argument('--epochs', type=int, default=30)
    parser.add_argument('--batch-size', type=int, default=64)
    parser.add_argument('--lr', type=float, default=2e-3)
    parser.add_argument('--seed', type=int, default=0)
    args = parser.parse_args(argv)
    # Keep mmengine's per-parameter initialisation report out of the progress output.
    MMLogger.get_instance('mmlinear_benchmark', log_level='WARNING')
    if args.epochs < 1 or args.batch_size < 1:
        raise SystemExit('--epochs and --batch-size must be positive')

    data = {split: load_split(args.data, split) for split in ('train', 'val')}
    if len(data['train'][0]) < args.batch_size:
        raise SystemExit(f'--batch-size {args.batch_size} exceeds the training set')
    os.makedirs(args.out, exist_ok=True)
    if args.weightformer_dynamic:
        bodies = {
            f'dynamic {frequency}': (lambda frequency=frequency: weightformer_body(frequency))
            for frequency in args.weightformer_dynamic
        }
    else:
        bodies = {
            variant: (lambda variant=variant: infvit_body(variant))
            for variant in args.variants
        }
    total_epochs = len(bodies) * args.epochs
    start = time.time()
    done = [0]

    def on_epoch(variant: str):

        def report(epoch: int, acc: float) -> None:
            done[0] += 1
            elapsed = time.time() - start
            eta = elapsed / done[0] * (total_epochs - done[0])
            print(
                f'  {variant:8s} epoch {epoch + 1:3d}/{args.epochs}  val top-1 {100 * acc:5.1f}%'
                f'  [elapsed {elapsed:5.0f} s, ETA {eta:5.0f} s]',
                flush=True)

        return report

    curves, seconds, params = {}, {}, {}
    for variant, build_body in bodies.items():
        t0 = time.time()
        curves[variant], params[variant] = train_variant(build_body, data, args, on_epoch(variant))
        seconds[variant] = time.time() - t0

    print(f'\nRelational shapes ({len(data["train"][0])} train / {len(data["val"][0])} val, '
          f'{args.epochs} epochs, seed {args.seed}):')
    print(f'  {"body" if args.weightformer_dynamic else "attention":18s} {"params":>9s} '
          f'{"final top-1":>11s} {"best top-1":>10s} {"time":>7s}')
    for variant, curve in curves.items():
        name = 'none (no mixing)' if variant == 'none' else variant
        print(f'  {name:18s} {params[variant]:9,d} {100 * curve[-1]:10.1f}% '
              f'{100 * max(curve):9.1f}% {seconds[variant]:6.0f}s')
    with open(osp.join(args.out, 'results.json'), 'w') as f:
        json.dump(
            dict(settings=vars(args), curves=curves, seconds=seconds, params=params), f, indent=2)
    plot(curves, osp.join(args.out, 'curves.png'))
    print(f'wrote {args.out}/results.json and {args.out}/curves.png')


if __name__ == '__main__':
    main()
