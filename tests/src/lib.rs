//! End-to-end tests of `stockade` and `stockade-runner` live in `tests/`; helper
//! programs they run live in `src/bin/`.
