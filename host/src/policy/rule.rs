//! [`Rule`]: every name a refusal or a stop is known by, from the policy
//! that refused to the audit line and the model's text. The names are the
//! audit log's vocabulary (docs/audit.md, "Rules"); a test holds the two
//! to each other.

use std::fmt;

/// The rule that refused an operation or stopped a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Rule {
    // `resolve()`, in the order it checks.
    UnknownRoot,
    NulByte,
    TooLong,
    AbsolutePath,
    EmptyPath,
    Permission,
    Confinement,
    Deny,
    RootItself,
    /// A name Windows reads as a device, a stream, a drive or another
    /// machine (`policy::windows`); Windows builds only.
    WindowsName,
    /// Outside the session's client roots (`client_roots = "narrow"`).
    ClientRoots,

    // Admission: what a call waits for or spends before its component runs.
    /// The places the call changes stayed locked until its deadline.
    Locked,
    /// No call slot freed in time.
    Busy,
    /// The client cancelled the call.
    Cancelled,
    /// The root's byte quota.
    Quota,
    /// The root's `min_free_bytes`.
    Reserve,
    /// The root's `trash_max_bytes`.
    TrashBudget,
    /// The audit log cannot be written.
    Audit,
    /// Lines the audit log could not keep (a line of its own).
    AuditLost,

    // The policing filesystem, refusing a guest's operation.
    /// Not a regular file, directory or symlink (a FIFO, a device, a socket).
    SpecialFile,
    /// The staging area a call's changes wait in.
    Staging,
    /// The call's changes would stage more than the overlay holds.
    Overlay,
    /// More open descriptors than a call may hold.
    TooManyDescriptors,
    /// A probe of the host file system failed.
    ProbeFailed,
    /// A descriptor the guest made up.
    UntrackedDescriptor,

    // Stops: why the host ended a call before it answered.
    /// The call's `tool_timeout_ms` passed.
    Timeout,
    /// The call's memory cap.
    Memory,
    /// The component trapped.
    Crashed,
    /// The result was over `max_output_bytes`.
    Output,
    /// No file descriptor free on the host.
    Descriptors,
    /// A full or read-only disk.
    Disk,
    /// Publishing the call's changes failed.
    Publish,

    // Publish: what a call's publish did to a path it did not expect.
    /// The path changed on disk while the call ran; what was there was
    /// kept in the trash before the call's version replaced it.
    ChangedMeanwhile,
    /// The path changed on disk while the call ran, twice: the call is
    /// refused and changes nothing.
    Conflict,

    // Resources.
    /// A session's resource subscriptions are at `max_subscriptions` (a
    /// protocol error, not a call: no audit line).
    MaxSubscriptions,
}

impl Rule {
    /// Every rule, in declaration order.
    pub const ALL: [Rule; 35] = [
        Rule::UnknownRoot,
        Rule::NulByte,
        Rule::TooLong,
        Rule::AbsolutePath,
        Rule::EmptyPath,
        Rule::Permission,
        Rule::Confinement,
        Rule::Deny,
        Rule::RootItself,
        Rule::WindowsName,
        Rule::ClientRoots,
        Rule::Locked,
        Rule::Busy,
        Rule::Cancelled,
        Rule::Quota,
        Rule::Reserve,
        Rule::TrashBudget,
        Rule::Audit,
        Rule::AuditLost,
        Rule::SpecialFile,
        Rule::Staging,
        Rule::Overlay,
        Rule::TooManyDescriptors,
        Rule::ProbeFailed,
        Rule::UntrackedDescriptor,
        Rule::Timeout,
        Rule::Memory,
        Rule::Crashed,
        Rule::Output,
        Rule::Descriptors,
        Rule::Disk,
        Rule::Publish,
        Rule::ChangedMeanwhile,
        Rule::Conflict,
        Rule::MaxSubscriptions,
    ];

    /// The rule's name in audit lines and in the model's text.
    pub fn as_str(self) -> &'static str {
        match self {
            Rule::UnknownRoot => "unknown_root",
            Rule::NulByte => "nul_byte",
            Rule::TooLong => "too_long",
            Rule::AbsolutePath => "absolute_path",
            Rule::EmptyPath => "empty_path",
            Rule::Permission => "permission",
            Rule::Confinement => "confinement",
            Rule::Deny => "deny",
            Rule::RootItself => "root_itself",
            Rule::WindowsName => "windows_name",
            Rule::ClientRoots => "client_roots",
            Rule::Locked => "locked",
            Rule::Busy => "busy",
            Rule::Cancelled => "cancelled",
            Rule::Quota => "quota",
            Rule::Reserve => "reserve",
            Rule::TrashBudget => "trash_budget",
            Rule::Audit => "audit",
            Rule::AuditLost => "audit_lost",
            Rule::SpecialFile => "special_file",
            Rule::Staging => "staging",
            Rule::Overlay => "overlay",
            Rule::TooManyDescriptors => "too_many_descriptors",
            Rule::ProbeFailed => "probe_failed",
            Rule::UntrackedDescriptor => "untracked_descriptor",
            Rule::Timeout => "timeout",
            Rule::Memory => "memory",
            Rule::Crashed => "crashed",
            Rule::Output => "output",
            Rule::Descriptors => "descriptors",
            Rule::Disk => "disk",
            Rule::Publish => "publish",
            Rule::ChangedMeanwhile => "changed_meanwhile",
            Rule::Conflict => "conflict",
            Rule::MaxSubscriptions => "max_subscriptions",
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl serde::Serialize for Rule {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::Rule;

    /// The names docs/audit.md's "Rules" table lists, in its first column.
    fn documented() -> BTreeSet<String> {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/audit.md");
        let text = std::fs::read_to_string(path).expect("read docs/audit.md");
        let section = text
            .split("\n## ")
            .find(|s| s.starts_with("Rules\n"))
            .expect("docs/audit.md has a \"## Rules\" section");
        section
            .lines()
            .filter_map(|l| l.strip_prefix("| `"))
            .filter_map(|l| l.split_once('`'))
            .map(|(name, _)| name.to_owned())
            .collect()
    }

    #[test]
    fn the_rules_are_exactly_those_the_audit_docs_list() {
        let ours: BTreeSet<String> = Rule::ALL.iter().map(|r| r.as_str().to_owned()).collect();
        let listed = documented();
        assert!(
            listed.len() > 20,
            "too few rules found in docs/audit.md: {listed:?}"
        );
        assert_eq!(
            ours.difference(&listed).collect::<Vec<_>>(),
            Vec::<&String>::new(),
            "rules docs/audit.md does not list"
        );
        assert_eq!(
            listed.difference(&ours).collect::<Vec<_>>(),
            Vec::<&String>::new(),
            "docs/audit.md lists rules the server does not have"
        );
    }

    #[test]
    fn all_holds_each_rule_once_with_its_own_name() {
        let names: BTreeSet<&str> = Rule::ALL.iter().map(|r| r.as_str()).collect();
        assert_eq!(names.len(), Rule::ALL.len());
        // In declaration order, none left out (`MaxSubscriptions` is the last variant).
        for (i, rule) in Rule::ALL.into_iter().enumerate() {
            assert_eq!(rule as usize, i, "{rule:?}");
        }
        assert_eq!(Rule::ALL.len(), Rule::MaxSubscriptions as usize + 1);
        for rule in Rule::ALL {
            assert!(
                rule.as_str()
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c == '_'),
                "{rule:?}"
            );
        }
    }
}
