//! A command missing from the permission grant compiles and passes every test that mocks
//! `invoke`, then fails in the app with "not allowed". This test reads the sources and
//! checks that the handler list, the build script's command list, the permission set and
//! the `#[tauri::command]` functions all name the same commands.

use std::collections::BTreeSet;
use std::path::Path;

fn read(rel: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// The text between `start` and the next `end` after it.
fn between<'a>(text: &'a str, start: &str, end: &str) -> &'a str {
    let from = text.find(start).unwrap_or_else(|| panic!("{start:?} not found")) + start.len();
    let len = text[from..].find(end).unwrap_or_else(|| panic!("{end:?} not found after {start:?}"));
    &text[from..from + len]
}

fn quoted(text: &str) -> Vec<String> {
    text.split('"').skip(1).step_by(2).map(str::to_string).collect()
}

fn set(items: impl IntoIterator<Item = String>) -> BTreeSet<String> {
    items.into_iter().collect()
}

fn handler_commands() -> BTreeSet<String> {
    let lib = read("src/lib.rs");
    let list = between(&lib, "generate_handler![", "]");
    set(list.split(',').map(str::trim).filter(|s| !s.is_empty()).map(|p| p.rsplit("::").next().unwrap().to_string()))
}

fn command_functions() -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for entry in std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/commands")).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        for part in text.split("#[tauri::command]").skip(1) {
            let after_fn = between(part, "fn ", "(");
            names.insert(after_fn.trim().to_string());
        }
    }
    names
}

#[test]
fn every_command_is_registered_declared_and_granted() {
    let handlers = handler_commands();
    assert!(handlers.len() >= 20, "parsed too few handlers: {handlers:?}");
    assert_eq!(command_functions(), handlers, "#[tauri::command] functions vs generate_handler!");

    let build = read("build.rs");
    let declared = set(quoted(between(&build, "const COMMANDS: &[&str] = &[", "];")));
    assert_eq!(declared, handlers, "build.rs COMMANDS vs generate_handler!");

    let perms = read("permissions/app.toml");
    let granted = set(quoted(between(&perms, "permissions = [", "]")).into_iter().map(|p| {
        p.strip_prefix("allow-").unwrap_or_else(|| panic!("{p} is not an allow- permission")).replace('-', "_")
    }));
    assert_eq!(granted, handlers, "permissions/app.toml vs generate_handler!");

    let capability: serde_json::Value = serde_json::from_str(&read("capabilities/default.json")).unwrap();
    let listed: Vec<&str> = capability["permissions"].as_array().unwrap().iter().filter_map(|p| p.as_str()).collect();
    assert!(listed.contains(&"app-commands"), "the main window's capability must grant the app commands");
    // Nothing beyond the app's commands and event listening (for file drops).
    for p in listed {
        assert!(p == "app-commands" || p.starts_with("core:event:allow-"), "unexpected permission {p}");
    }
}

#[test]
fn the_content_security_policy_allows_nothing_remote() {
    let conf: serde_json::Value = serde_json::from_str(&read("tauri.conf.json")).unwrap();
    let csp = conf["app"]["security"]["csp"].as_object().expect("a CSP is set");
    assert_eq!(csp["default-src"], "'self'");
    assert_eq!(csp["script-src"], "'self'");
    for (directive, value) in csp {
        let value = value.as_str().unwrap();
        for source in value.split_whitespace() {
            let local = source.starts_with('\'') || matches!(source, "data:" | "blob:" | "ipc:" | "http://ipc.localhost");
            assert!(local, "{directive} allows {source}");
        }
    }
    assert_eq!(conf["app"]["withGlobalTauri"], true);
}
