//! Rules about the source itself, checked by reading `src/`:
//! nothing outside `src/sync.rs` names the atomics, and no code (doc examples
//! aside) starts a thread, a task or uses `unsafe`; public enums and field
//! structs are `#[non_exhaustive]`; `tests/README.md` names every test file;
//! the crate docs' feature table names every feature of `Cargo.toml`.

use std::fs;
use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Each source file's code lines: comments and doc comments removed, and
/// loom model modules left out. Such a module is built only for the model
/// checker and runs loom's own threads (`loom::thread::spawn`, never a real
/// one); it starts with this exact attribute line and ends at the next `}`
/// in the first column.
const LOOM_MODELS: &str = "#[cfg(all(test, failfast_loom))]";

/// Whether `file` is a module of its own built only for the crate's unit
/// tests: its parent declares it right after a `#[cfg(all(test, …))]` line
/// (`src/registry/lock_free_reads.rs`, whose reader runs on a thread).
fn test_only(file: &Path) -> bool {
    let stem = file.file_stem().unwrap().to_str().unwrap();
    let dir = file.parent().unwrap();
    let parent = ["mod.rs", "lib.rs"]
        .iter()
        .map(|p| dir.join(p))
        .find(|p| p.exists() && p != file);
    let Some(parent) = parent else { return false };
    let text = fs::read_to_string(parent).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    lines
        .windows(2)
        .any(|w| w[0].starts_with("#[cfg(all(test") && w[1] == format!("mod {stem};"))
}

fn code_lines() -> Vec<(PathBuf, usize, String)> {
    let mut files = Vec::new();
    rust_files(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &mut files,
    );
    assert!(files.len() > 10, "found the sources: {files:?}");
    let mut lines = Vec::new();
    for file in files.into_iter().filter(|f| !test_only(f)) {
        let mut in_loom_models = false;
        for (i, line) in fs::read_to_string(&file).unwrap().lines().enumerate() {
            if line == LOOM_MODELS {
                in_loom_models = true;
            }
            if in_loom_models {
                in_loom_models = line != "}";
                continue;
            }
            let code = line.split("//").next().unwrap_or("").to_owned();
            if !code.trim().is_empty() {
                lines.push((file.clone(), i + 1, code));
            }
        }
    }
    lines
}

#[test]
fn only_the_sync_shim_names_atomics() {
    let offenders: Vec<_> = code_lines()
        .into_iter()
        .filter(|(file, _, code)| {
            !file.ends_with("src/sync.rs")
                && (code.contains("sync::atomic") || code.contains("loom::"))
        })
        .collect();
    assert!(
        offenders.is_empty(),
        "atomics named outside src/sync.rs: {offenders:#?}"
    );
}

#[test]
fn no_thread_task_or_unsafe_in_the_library() {
    let forbidden = [
        "thread::spawn",
        "std::thread",
        "tokio::spawn",
        "spawn_blocking",
        "unsafe ",
    ];
    let offenders: Vec<_> = code_lines()
        .into_iter()
        // Asking whether this thread unwinds (a panicking call is a failure)
        // starts nothing.
        .map(|(file, n, code)| (file, n, code.replace("std::thread::panicking()", "")))
        .filter(|(_, _, code)| forbidden.iter().any(|f| code.contains(f)))
        .filter(|(_, _, code)| !code.contains("forbid(unsafe_code)"))
        .collect();
    assert!(
        offenders.is_empty(),
        "background work or unsafe in src/: {offenders:#?}"
    );
}

/// Public enums, and public structs with public fields, are
/// `#[non_exhaustive]`: a reason, a state or a snapshot field added later is
/// then not a breaking change. The exceptions are closed sets by
/// construction, which callers match on in every call.
#[test]
fn public_enums_and_field_structs_are_non_exhaustive() {
    let closed_by_construction = [
        // What a call can tell a breaker: for it, against it, or neither.
        "Outcome",
        // A call either did not run (rejected) or ran and failed.
        "CallError",
        // An answer is fresh or a fallback; a wildcard arm would pass a new
        // kind of answer off unlabelled.
        "Answer",
    ];
    let mut files = Vec::new();
    rust_files(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &mut files,
    );
    let mut checked = 0;
    let mut offenders = Vec::new();
    for file in files {
        let text = fs::read_to_string(&file).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let Some(rest) = line
                .strip_prefix("pub enum ")
                .or_else(|| line.strip_prefix("pub struct "))
            else {
                continue;
            };
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if line.starts_with("pub struct ") {
                // Only structs with named public fields can be built by a literal.
                let body = lines[i + 1..].iter().take_while(|l| !l.starts_with('}'));
                if !line.ends_with('{') || !body.into_iter().any(|l| l.starts_with("    pub ")) {
                    continue;
                }
            }
            checked += 1;
            let attributes = lines[..i].iter().rev().take_while(|l| {
                l.starts_with("#[") || l.starts_with("///") || l.starts_with("    ")
            });
            let marked = attributes
                .into_iter()
                .any(|l| l.trim() == "#[non_exhaustive]");
            if !marked && !closed_by_construction.contains(&name.as_str()) {
                offenders.push(format!("{}:{}: {name}", file.display(), i + 1));
            }
        }
    }
    assert!(checked > 10, "found the public types ({checked})");
    assert!(
        offenders.is_empty(),
        "public enums / field structs without #[non_exhaustive]: {offenders:#?}"
    );
}

/// `tests/README.md` maps every test file to what it proves: a new file
/// without its line there is a file a newcomer cannot find.
#[test]
fn every_test_file_is_in_the_tests_readme() {
    let tests = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let readme = std::fs::read_to_string(tests.join("README.md")).unwrap();
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(&tests).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if name.ends_with(".rs") && !readme.contains(&format!("`{name}`")) {
            missing.push(name);
        }
    }
    assert!(
        missing.is_empty(),
        "tests/README.md does not name {missing:?}"
    );
}

#[test]
fn the_feature_table_names_every_feature() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let section = manifest
        .split("\n[features]\n")
        .nth(1)
        .expect("a [features] section");
    let section = section.split("\n[").next().unwrap();
    let features: Vec<&str> = section
        .lines()
        .filter(|l| !l.starts_with('#') && l.contains(" = "))
        .map(|l| l.split(" = ").next().unwrap().trim())
        .filter(|f| *f != "default")
        .collect();
    assert!(features.len() >= 5, "read the features: {features:?}");
    let lib = fs::read_to_string(root.join("src/lib.rs")).unwrap();
    let table: Vec<&str> = lib
        .lines()
        .filter_map(|l| l.strip_prefix("//! | `"))
        .filter_map(|l| l.split('`').next())
        .collect();
    for feature in features {
        assert!(
            table.contains(&feature),
            "the feature table in src/lib.rs has no row for `{feature}`"
        );
    }
}
