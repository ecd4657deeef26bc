"""A small ImageFolder of JPEGs made with Pillow, for the Swin dataloader case.

Images have ImageNet-like sizes (each side drawn between min_side and max_side) and smooth random
content, so decoding and the augmentations do realistic work. The folder is made once per
dataset spec and reused; a stamp file written last marks it complete.
"""

import json
import random
import shutil
from pathlib import Path

from speedstats.errors import UserError
from speedstats.fsutil import write_atomic

STAMP = "speedstats-dataset.json"


def _spec_key(spec):
    return {"images": spec.images, "classes": spec.classes, "min_side": spec.min_side,
            "max_side": spec.max_side, "seed": spec.seed, "version": 1}


def dataset_root(cache_dir, spec):
    key = _spec_key(spec)
    name = "imagefolder-{images}x{classes}-{min_side}-{max_side}-s{seed}".format(**key)
    return Path(cache_dir) / name


def ensure_imagefolder(cache_dir, spec, progress=None):
    """Path of the `train/` folder of a complete dataset for spec, making it when missing."""
    from PIL import Image

    root = dataset_root(cache_dir, spec)
    stamp = root / STAMP
    if stamp.is_file() and json.loads(stamp.read_text()) == _spec_key(spec):
        return root / "train"
    if root.exists():
        shutil.rmtree(root)
    rng = random.Random(spec.seed)
    train = root / "train"
    try:
        for i in range(spec.images):
            class_dir = train / f"class{i % spec.classes:04d}"
            class_dir.mkdir(parents=True, exist_ok=True)
            width = rng.randint(spec.min_side, spec.max_side)
            height = rng.randint(spec.min_side, spec.max_side)
            small = Image.frombytes("RGB", (16, 16), rng.randbytes(16 * 16 * 3))
            small.resize((width, height), Image.BICUBIC).save(class_dir / f"img{i:06d}.jpg", quality=90)
            if progress and (i + 1) % 100 == 0:
                progress(f"dataset: {i + 1}/{spec.images} images")
    except OSError as exc:  # a full disk: no half-made dataset left to be taken for a whole one
        shutil.rmtree(root, ignore_errors=True)
        raise UserError(f"{root}: cannot write the dataset: {exc.strerror or type(exc).__name__}") from None
    write_atomic(stamp, json.dumps(_spec_key(spec)), "dataset stamp")
    return train
