//! Shared steps for the CustomResourceDefinition end-to-end tests: apply a CRD with the real
//! kubectl and wait until kube would serve its resource (the CRD `Established` and the
//! resource in discovery).

use std::time::Duration;

use crate::{eventually, tail, Kubegate};

/// Applies `crd` (YAML) named `<plural>.<group>` and waits until `<plural>` can be listed.
/// Panics, with the server log's tail, when that takes too long.
pub fn serve_crd(gate: &Kubegate, crd: &str, name: &str) {
    gate.ok_stdin(&["apply", "-f", "-"], crd);
    gate.ok(&[
        "wait",
        "--for",
        "condition=established",
        "--timeout=30s",
        &format!("crd/{name}"),
    ]);
    // kubectl caches discovery: a fresh cache sees the group the CRD just added.
    let plural = name.split('.').next().unwrap_or(name);
    let served = eventually(Duration::from_secs(10), || {
        gate.kubectl_fresh(&["get", plural]).status.success()
    });
    assert!(served, "{plural} never served:\n{}", tail(&gate.log(), 30));
}
