//! `/version` and `kubegate version`: the build's version in kube's `version.Info` shape.

/// The Kubernetes API version kubegate serves (kubectl compares minor versions for skew).
pub const KUBE_MAJOR: &str = "1";
pub const KUBE_MINOR: &str = "33";

/// kube's `version.Info` for this build.
pub fn version_info() -> serde_json::Value {
    serde_json::json!({
        "major": KUBE_MAJOR,
        "minor": KUBE_MINOR,
        "gitVersion": format!("v{KUBE_MAJOR}.{KUBE_MINOR}.0-kubegate.{}", env!("CARGO_PKG_VERSION")),
        "gitCommit": option_env!("KUBEGATE_GIT_COMMIT").unwrap_or("unknown"),
        "gitTreeState": "clean",
        "buildDate": option_env!("KUBEGATE_BUILD_DATE").unwrap_or("1970-01-01T00:00:00Z"),
        "goVersion": "n/a (rust)",
        "compiler": "rustc",
        "platform": format!("{}/{}", std::env::consts::OS, match std::env::consts::ARCH { "x86_64" => "amd64", "aarch64" => "arm64", a => a }),
    })
}
