//! `/version` and `kubegate version`: the build's version in kube's `version.Info` shape.

/// The Kubernetes API version kubegate serves (kubectl compares minor versions for skew).
pub const KUBE_MAJOR: &str = "1";
pub const KUBE_MINOR: &str = "33";
/// The oldest minor version whose behaviour kube 1.33 stays compatible with (its
/// `minCompatibilityMinor`, one below the binary's).
const MIN_COMPATIBILITY_MINOR: &str = "32";

/// kube's release `gitVersion` for this build. kubegate's own version goes in semver build
/// metadata (`+`, as k3s writes `v1.33.0+k3s1`), never as a pre-release (`-`): a pre-release
/// satisfies no plain constraint, so helm charts' `kubeVersion: ">=1.21.0"` and their
/// `semverCompare` checks would refuse kubegate.
pub fn git_version() -> String {
    format!(
        "v{KUBE_MAJOR}.{KUBE_MINOR}.0+kubegate.{}",
        env!("CARGO_PKG_VERSION")
    )
}

/// kube's `version.Info` for this build.
pub fn version_info() -> serde_json::Value {
    serde_json::json!({
        "major": KUBE_MAJOR,
        "minor": KUBE_MINOR,
        "emulationMajor": KUBE_MAJOR,
        "emulationMinor": KUBE_MINOR,
        "minCompatibilityMajor": KUBE_MAJOR,
        "minCompatibilityMinor": MIN_COMPATIBILITY_MINOR,
        "gitVersion": git_version(),
        "gitCommit": option_env!("KUBEGATE_GIT_COMMIT").unwrap_or("unknown"),
        "gitTreeState": "clean",
        "buildDate": option_env!("KUBEGATE_BUILD_DATE").unwrap_or("1970-01-01T00:00:00Z"),
        "goVersion": "n/a (rust)",
        "compiler": "rustc",
        "platform": format!("{}/{}", std::env::consts::OS, match std::env::consts::ARCH { "x86_64" => "amd64", "aarch64" => "arm64", a => a }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_git_version_is_a_release_with_kubegates_version_as_build_metadata() {
        let version = git_version();
        let (release, build) = version.split_once('+').expect("build metadata");
        assert_eq!(release, format!("v{KUBE_MAJOR}.{KUBE_MINOR}.0"));
        assert!(!release.contains('-'), "a pre-release: {version}");
        assert!(build.starts_with("kubegate."), "{version}");
        // Semver build metadata: dot-separated non-empty [0-9A-Za-z-] identifiers.
        assert!(build
            .split('.')
            .all(|id| !id.is_empty() && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')));
        let info = version_info();
        assert_eq!(info["gitVersion"], version);
        assert_eq!(info["emulationMinor"], KUBE_MINOR);
        assert_eq!(info["minCompatibilityMinor"], "32");
    }
}
