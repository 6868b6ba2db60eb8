"""The training protocol: every name built and parsed in one place (names), the control and
tensor messages (messages) over the tensor codec — raw bytes behind a small msgpack header
(codec) — and the training's parameters, validated with errors that name the key (config).
No I/O: the apps and the experiment runner both read it."""
