//! The APIService priorities that order discovery: kube-apiserver 1.33's `apiVersionPriorities`
//! for the built-in group-versions (`DefaultGenericAPIServicePriorities` in
//! `pkg/controlplane/apiserver/aggregator.go`, overlaid by the table in
//! `cmd/kube-apiserver/app/aggregator.go`), and the priorities kube gives the group-versions
//! that table does not list.

/// kube-apiserver 1.33's `apiVersionPriorities`: (group, version, groupPriorityMinimum,
/// versionPriority). The generic table with the kube-apiserver table merged over it (the
/// latter wins for `resource.k8s.io/v1alpha3`: 16200/1, not the generic 15900/9).
const API_VERSION_PRIORITIES: &[(&str, &str, i32, i32)] = &[
    ("", "v1", 18000, 1),
    ("apps", "v1", 17800, 15),
    ("events.k8s.io", "v1", 17750, 15),
    ("events.k8s.io", "v1beta1", 17750, 5),
    ("authentication.k8s.io", "v1", 17700, 15),
    ("authentication.k8s.io", "v1beta1", 17700, 9),
    ("authentication.k8s.io", "v1alpha1", 17700, 1),
    ("authorization.k8s.io", "v1", 17600, 15),
    ("autoscaling", "v1", 17500, 15),
    ("autoscaling", "v2", 17500, 30),
    ("autoscaling", "v2beta1", 17500, 9),
    ("autoscaling", "v2beta2", 17500, 1),
    ("batch", "v1", 17400, 15),
    ("batch", "v1beta1", 17400, 9),
    ("batch", "v2alpha1", 17400, 9),
    ("certificates.k8s.io", "v1", 17300, 15),
    ("certificates.k8s.io", "v1beta1", 17300, 9),
    ("certificates.k8s.io", "v1alpha1", 17300, 1),
    ("networking.k8s.io", "v1", 17200, 15),
    ("networking.k8s.io", "v1beta1", 17200, 9),
    ("policy", "v1", 17100, 15),
    ("policy", "v1beta1", 17100, 9),
    ("rbac.authorization.k8s.io", "v1", 17000, 15),
    ("storage.k8s.io", "v1", 16800, 15),
    ("storage.k8s.io", "v1beta1", 16800, 9),
    ("storage.k8s.io", "v1alpha1", 16800, 1),
    ("apiextensions.k8s.io", "v1", 16700, 15),
    ("admissionregistration.k8s.io", "v1", 16700, 15),
    ("admissionregistration.k8s.io", "v1beta1", 16700, 12),
    ("admissionregistration.k8s.io", "v1alpha1", 16700, 9),
    ("scheduling.k8s.io", "v1", 16600, 15),
    ("coordination.k8s.io", "v1", 16500, 15),
    ("coordination.k8s.io", "v1beta1", 16500, 13),
    ("coordination.k8s.io", "v1alpha2", 16500, 12),
    ("node.k8s.io", "v1", 16300, 15),
    ("node.k8s.io", "v1beta1", 16300, 9),
    ("node.k8s.io", "v1alpha1", 16300, 1),
    ("discovery.k8s.io", "v1", 16200, 15),
    ("discovery.k8s.io", "v1beta1", 16200, 12),
    ("resource.k8s.io", "v1beta2", 16200, 15),
    ("resource.k8s.io", "v1beta1", 16200, 9),
    ("resource.k8s.io", "v1alpha3", 16200, 1),
    ("flowcontrol.apiserver.k8s.io", "v1", 16100, 21),
    ("flowcontrol.apiserver.k8s.io", "v1beta3", 16100, 18),
    ("flowcontrol.apiserver.k8s.io", "v1beta2", 16100, 15),
    ("flowcontrol.apiserver.k8s.io", "v1beta1", 16100, 12),
    ("flowcontrol.apiserver.k8s.io", "v1alpha1", 16100, 9),
    ("internal.apiserver.k8s.io", "v1alpha1", 16000, 9),
    ("storagemigration.k8s.io", "v1alpha1", 15800, 9),
];

/// The aggregator's own group. It has no APIService; kube lists it first in both legacy
/// discovery (hard-coded first entry of `/apis`) and aggregated discovery (group priority
/// 20001, above the 20000 an APIService may ask for, version priority 0).
const APIREGISTRATION_GROUP: &str = "apiregistration.k8s.io";
const APIREGISTRATION_PRIORITY: (i32, i32) = (20001, 0);

/// What kube's crdregistration controller gives a CRD's APIService (and the apiextensions
/// server's aggregated discovery sets for CRD group-versions): low group priority, every
/// version equal so kube's version order decides.
const CRD_PRIORITY: (i32, i32) = (1000, 100);

/// The `groupPriorityMinimum` and `versionPriority` kube-apiserver gives the APIService of a
/// built-in group-version (its `apiVersionPriorities` table); `None` for a group-version kube
/// does not list.
pub fn apiservice_priority(group: &str, version: &str) -> Option<(i32, i32)> {
    API_VERSION_PRIORITIES
        .iter()
        .find(|(g, v, _, _)| *g == group && *v == version)
        .map(|&(_, _, group_priority, version_priority)| (group_priority, version_priority))
}

/// The priorities of a group-version kubegate serves itself: kube's table for built-ins, the
/// aggregator's for `apiregistration.k8s.io`, and the CRD default for everything else (every
/// local group-version kube does not list is a CRD's, as in kube, where only those two kinds
/// of local APIService exist).
pub(super) fn local_priority(group: &str, version: &str) -> (i32, i32) {
    if group == APIREGISTRATION_GROUP {
        return APIREGISTRATION_PRIORITY;
    }
    apiservice_priority(group, version).unwrap_or(CRD_PRIORITY)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kube_1_33_table_entries() {
        assert_eq!(apiservice_priority("", "v1"), Some((18000, 1)));
        assert_eq!(apiservice_priority("apps", "v1"), Some((17800, 15)));
        assert_eq!(apiservice_priority("autoscaling", "v2"), Some((17500, 30)));
        assert_eq!(
            apiservice_priority("flowcontrol.apiserver.k8s.io", "v1"),
            Some((16100, 21))
        );
        assert_eq!(
            apiservice_priority("coordination.k8s.io", "v1beta1"),
            Some((16500, 13))
        );
        // kube-apiserver's own table overrides the generic one.
        assert_eq!(
            apiservice_priority("resource.k8s.io", "v1alpha3"),
            Some((16200, 1))
        );
        assert_eq!(apiservice_priority("apps", "v1beta1"), None);
        assert_eq!(apiservice_priority("example.com", "v1"), None);
        assert_eq!(apiservice_priority("apiregistration.k8s.io", "v1"), None);
    }

    #[test]
    fn table_has_one_entry_per_group_version_and_one_priority_per_group() {
        for (i, (g, v, gp, _)) in API_VERSION_PRIORITIES.iter().enumerate() {
            for (g2, v2, gp2, _) in &API_VERSION_PRIORITIES[i + 1..] {
                assert!(g != g2 || v != v2, "{g}/{v} listed twice");
                assert!(g != g2 || gp == gp2, "{g} has two group priorities");
            }
        }
    }

    #[test]
    fn local_priorities() {
        assert_eq!(
            local_priority("rbac.authorization.k8s.io", "v1"),
            (17000, 15)
        );
        assert_eq!(local_priority("apiregistration.k8s.io", "v1"), (20001, 0));
        assert_eq!(local_priority("stable.example.com", "v1"), (1000, 100));
        // A built-in group's version kube does not list is treated like a CRD's.
        assert_eq!(local_priority("apps", "v1beta1"), (1000, 100));
    }
}
