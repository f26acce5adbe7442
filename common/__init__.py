"""The bottom layer: small generic helpers every other package may use, importing none of them.

``errors`` (:class:`~common.errors.UserError`, the base of every error whose message is the whole
story), ``atomic`` (writes that appear whole or not at all), ``cache_dir`` (``$RLTF_CACHE_DIR``),
``config_fields`` (bounded numeric settings fields and mapping -> settings coercion) and
``minilm`` (where all-MiniLM-L6-v2 lives).
"""
