"""Static files compressed, and cached by browsers for as long as their content stays the same.

WhiteNoise serves them from the web process (runserver in the demo, gunicorn), nginx from the
collected folder in a deployment (deploy/nginx.conf.template). Two modes, chosen by
``settings.STATIC_COLLECTED`` (docs/configuration.md, "Static files"):

- collected: ``collectstatic`` writes each file under a name carrying a hash of its content
  (``charts.3f2a9c1b7e04.js``), with a ``.gz`` beside it, and pages link the hashed name. A new
  content is a new name, so a browser may keep a file for a year without asking;
- not collected (tests, a bare ``runserver``): plain names, found in the source folders.
"""

from __future__ import annotations

from typing import Any

from whitenoise.compress import Compressor
from whitenoise.storage import CompressedManifestStaticFilesStorage

# Source maps are read by a developer's tools alone: not worth compressing (6 MB of the API
# docs' maps).
SKIP_COMPRESS_EXTENSIONS = (*Compressor.SKIP_COMPRESS_EXTENSIONS, "map")


class HashedCompressedStorage(CompressedManifestStaticFilesStorage):
    """WhiteNoise's hashed and compressed storage, linking the hashed names with DEBUG on too
    (Django links plain names then), so that the demo caches as a deployment does.

    gzip only, never brotli, even where the ``brotli`` package is installed: brotli at
    WhiteNoise's level took 4 s a megabyte here (gzip 0.1 s), which ``make demo`` would wait
    for, to save 18 % of plotly.js; nginx's stock build serves ``.gz`` alone, and browsers ask
    for brotli over https only (docs/configuration.md, "Static files")."""

    def url(self, name: str | None, force: bool = False) -> str:
        return super().url(name, force=True)

    def create_compressor(self, **kwargs: Any) -> Compressor:
        return Compressor(**{**kwargs, "extensions": SKIP_COMPRESS_EXTENSIONS, "use_brotli": False})
