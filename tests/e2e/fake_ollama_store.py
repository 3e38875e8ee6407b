#!/usr/bin/env python3
"""Write a minimal Ollama model store holding one GGUF, laid out as Ollama lays it out:
manifests/registry.ollama.ai/library/<model>/<tag> (a Docker v2 manifest) and
blobs/sha256-<hex> (the model, a config and a params layer).

Usage: fake_ollama_store.py STORE_DIR MODEL TAG FILE.gguf
"""
import hashlib
import json
import sys
from pathlib import Path


def blob(store: Path, data: bytes, media_type: str) -> dict:
    digest = hashlib.sha256(data).hexdigest()
    path = store / "blobs" / f"sha256-{digest}"
    if not path.exists():
        path.write_bytes(data)
    return {"mediaType": media_type, "digest": f"sha256:{digest}", "size": len(data)}


def main() -> None:
    store, model, tag, gguf = Path(sys.argv[1]), sys.argv[2], sys.argv[3], Path(sys.argv[4])
    (store / "blobs").mkdir(parents=True, exist_ok=True)
    config = {"model_format": "gguf", "model_family": "gemma3", "model_families": ["gemma3"], "file_type": "F32"}
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
        "config": blob(store, json.dumps(config).encode(), "application/vnd.docker.container.image.v1+json"),
        "layers": [
            blob(store, gguf.read_bytes(), "application/vnd.ollama.image.model"),
            blob(store, json.dumps({"stop": ["<end_of_turn>"]}).encode(), "application/vnd.ollama.image.params"),
        ],
    }
    path = store / "manifests" / "registry.ollama.ai" / "library" / model / tag
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(manifest))
    print(f"fake Ollama store: {model}:{tag} in {store}")


if __name__ == "__main__":
    main()
