//! Empty on purpose: the models live in `tests/` and compile only under
//! `RUSTFLAGS="--cfg failfast_loom"`. See `.ci/run` and the crate's `docs` module.
