//! Tool exposure: the `ToolPrefix` added to every tool name and the ordered
//! `AllowTool`/`DenyTool`/`AllowToolRegexp`/`DenyToolRegexp` rules that decide which
//! tools are offered at all, before any Rego policy runs.
//!
//! Semantics follow the official Zabbix MCP server: all rules form one list in the
//! order they were given, the first matching rule decides, a tool no rule matches is
//! allowed, and rules always match the plain (unprefixed) tool name.

use std::fmt;

use regex::Regex;

/// A rule pattern: an item-key-style wildcard (`*` matches any characters, the whole
/// name must match) or an RE2-style regular expression (matches anywhere in the name
/// unless anchored).
#[derive(Clone, Debug)]
pub enum Pattern {
    Wildcard(String),
    Regex(Regex),
}

/// One exposure rule, in the order it appeared in the configuration.
#[derive(Clone, Debug)]
pub enum ToolRule {
    Allow(Pattern),
    Deny(Pattern),
}

/// The exposure decision for a set of tools: prefix plus ordered rules.
#[derive(Clone, Debug, Default)]
pub struct Exposure {
    prefix: String,
    rules: Vec<ToolRule>,
}

#[derive(Debug, thiserror::Error)]
pub enum ExposureError {
    #[error("the pattern is empty")]
    EmptyPattern,
    #[error("invalid regular expression: {0}")]
    Regex(#[from] regex::Error),
}

impl Pattern {
    /// A wildcard pattern; `*` is the only special character.
    pub fn wildcard(text: &str) -> Result<Pattern, ExposureError> {
        if text.is_empty() {
            return Err(ExposureError::EmptyPattern);
        }
        Ok(Pattern::Wildcard(text.to_owned()))
    }

    /// A regular expression pattern (regex crate syntax, a close RE2 relative).
    pub fn regex(text: &str) -> Result<Pattern, ExposureError> {
        if text.is_empty() {
            return Err(ExposureError::EmptyPattern);
        }
        Ok(Pattern::Regex(Regex::new(text)?))
    }

    pub fn matches(&self, name: &str) -> bool {
        match self {
            Pattern::Wildcard(pattern) => wildcard_match(pattern, name),
            Pattern::Regex(regex) => regex.is_match(name),
        }
    }

    /// The pattern as written in the configuration.
    pub fn as_str(&self) -> &str {
        match self {
            Pattern::Wildcard(pattern) => pattern,
            Pattern::Regex(regex) => regex.as_str(),
        }
    }
}

impl ToolRule {
    /// The configuration parameter that produces this rule, e.g. `DenyToolRegexp`.
    pub fn parameter_name(&self) -> &'static str {
        match self {
            ToolRule::Allow(Pattern::Wildcard(_)) => "AllowTool",
            ToolRule::Allow(Pattern::Regex(_)) => "AllowToolRegexp",
            ToolRule::Deny(Pattern::Wildcard(_)) => "DenyTool",
            ToolRule::Deny(Pattern::Regex(_)) => "DenyToolRegexp",
        }
    }

    pub fn pattern(&self) -> &Pattern {
        match self {
            ToolRule::Allow(pattern) | ToolRule::Deny(pattern) => pattern,
        }
    }

    pub fn is_allow(&self) -> bool {
        matches!(self, ToolRule::Allow(_))
    }
}

impl fmt::Display for ToolRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={}", self.parameter_name(), self.pattern().as_str())
    }
}

impl Exposure {
    pub fn new(prefix: impl Into<String>, rules: Vec<ToolRule>) -> Exposure {
        Exposure {
            prefix: prefix.into(),
            rules,
        }
    }

    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    pub fn rules(&self) -> &[ToolRule] {
        &self.rules
    }

    /// Whether the tool with this plain name is exposed: first matching rule wins,
    /// no match means allowed.
    pub fn allows(&self, plain_name: &str) -> bool {
        self.rules
            .iter()
            .find(|rule| rule.pattern().matches(plain_name))
            .is_none_or(ToolRule::is_allow)
    }

    /// The name clients see.
    pub fn exposed_name(&self, plain: &str) -> String {
        format!("{}{}", self.prefix, plain)
    }

    /// The plain name behind an exposed name; `None` when the prefix is missing.
    pub fn plain_name<'a>(&self, exposed: &'a str) -> Option<&'a str> {
        exposed.strip_prefix(self.prefix.as_str())
    }
}

/// Whole-string match where `*` stands for any run of characters (item-key wildcard
/// syntax). Greedy with single backtrack point, so it stays linear-ish on tool names.
fn wildcard_match(pattern: &str, name: &str) -> bool {
    let pattern: Vec<char> = pattern.chars().collect();
    let name: Vec<char> = name.chars().collect();
    let (mut p, mut n) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while n < name.len() {
        if p < pattern.len() && pattern[p] == '*' {
            star = Some((p, n));
            p += 1;
        } else if p < pattern.len() && pattern[p] == name[n] {
            p += 1;
            n += 1;
        } else if let Some((star_p, star_n)) = star {
            p = star_p + 1;
            n = star_n + 1;
            star = Some((star_p, star_n + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|c| *c == '*')
}

#[cfg(test)]
mod tests {
    use super::{Exposure, Pattern, ToolRule, wildcard_match};

    const ALL_TOOLS: [&str; 22] = [
        "hostgroup_get",
        "templategroup_get",
        "host_get",
        "template_get",
        "item_get",
        "lld_get",
        "interface_get",
        "macro_get",
        "problem_get",
        "maintenance_get",
        "history_get",
        "trigger_get",
        "problem_acknowledge",
        "problem_unacknowledge",
        "problem_close",
        "problem_annotate",
        "problem_change_severity",
        "problem_suppress",
        "problem_unsuppress",
        "maintenance_create",
        "maintenance_update",
        "maintenance_delete",
    ];

    fn allow(p: &str) -> ToolRule {
        ToolRule::Allow(Pattern::wildcard(p).unwrap())
    }
    fn deny(p: &str) -> ToolRule {
        ToolRule::Deny(Pattern::wildcard(p).unwrap())
    }
    fn allow_re(p: &str) -> ToolRule {
        ToolRule::Allow(Pattern::regex(p).unwrap())
    }
    fn deny_re(p: &str) -> ToolRule {
        ToolRule::Deny(Pattern::regex(p).unwrap())
    }

    fn exposed(exposure: &Exposure) -> Vec<&'static str> {
        ALL_TOOLS
            .iter()
            .copied()
            .filter(|t| exposure.allows(t))
            .collect()
    }

    #[test]
    fn wildcards_match_whole_names() {
        assert!(wildcard_match("host_get", "host_get"));
        assert!(!wildcard_match("host_get", "hostgroup_get"));
        assert!(wildcard_match("host*", "hostgroup_get"));
        assert!(wildcard_match("*_get", "host_get"));
        assert!(!wildcard_match("*_get", "problem_close"));
        assert!(wildcard_match("problem_*ack*", "problem_unacknowledge"));
        assert!(wildcard_match("*", ""));
        assert!(wildcard_match("a*b*c", "aXbYbZc"));
        assert!(!wildcard_match("a*b*c", "aXbYbZ"));
        assert!(!wildcard_match("get", "host_get"));
    }

    #[test]
    fn no_rules_allow_everything() {
        let exposure = Exposure::new("", Vec::new());
        assert_eq!(exposed(&exposure).len(), 22);
    }

    #[test]
    fn first_match_wins() {
        let exposure = Exposure::new("", vec![allow("host_get"), deny("host*")]);
        assert!(exposure.allows("host_get"));
        assert!(!exposure.allows("hostgroup_get"));
        assert!(exposure.allows("problem_get"));
        let reversed = Exposure::new("", vec![deny("host*"), allow("host_get")]);
        assert!(!reversed.allows("host_get"));
    }

    #[test]
    fn allow_list_with_catch_all_deny() {
        let exposure = Exposure::new("", vec![allow("*_get"), deny("*")]);
        let names = exposed(&exposure);
        assert_eq!(names.len(), 12);
        assert!(names.iter().all(|n| n.ends_with("_get")));
    }

    #[test]
    fn regexps_match_anywhere_unless_anchored() {
        let unanchored = Exposure::new("", vec![deny_re("maintenance")]);
        assert!(!unanchored.allows("maintenance_get"));
        assert!(!unanchored.allows("maintenance_delete"));
        assert!(unanchored.allows("problem_get"));
        let anchored = Exposure::new("", vec![deny_re("^problem_(close|suppress)$")]);
        assert!(!anchored.allows("problem_close"));
        assert!(anchored.allows("problem_unsuppress"));
        let mixed = Exposure::new("", vec![allow_re("^(host|hostgroup)_get$"), deny_re(".")]);
        assert_eq!(exposed(&mixed), vec!["hostgroup_get", "host_get"]);
    }

    #[test]
    fn invalid_and_empty_patterns_are_rejected() {
        assert!(Pattern::regex("(").is_err());
        assert!(Pattern::regex("").is_err());
        assert!(Pattern::wildcard("").is_err());
    }

    #[test]
    fn prefix_is_added_and_stripped() {
        let exposure = Exposure::new("zbx_", vec![deny("item_get")]);
        assert_eq!(exposure.exposed_name("host_get"), "zbx_host_get");
        assert_eq!(exposure.plain_name("zbx_host_get"), Some("host_get"));
        assert_eq!(exposure.plain_name("host_get"), None);
        // Rules match plain names, never the prefixed ones.
        assert!(!exposure.allows("item_get"));
        assert!(exposure.allows("zbx_item_get"));
        let bare = Exposure::new("", Vec::new());
        assert_eq!(bare.plain_name("host_get"), Some("host_get"));
    }

    #[test]
    fn rules_render_as_parameters() {
        assert_eq!(deny("item_get").to_string(), "DenyTool=item_get");
        assert_eq!(allow_re("^a$").to_string(), "AllowToolRegexp=^a$");
    }

    #[test]
    fn official_default_configuration_exposes_seventeen_tools() {
        let denied = [
            "item_get",
            "lld_get",
            "interface_get",
            "macro_get",
            "history_get",
        ];
        let exposure = Exposure::new("", denied.iter().map(|t| deny(t)).collect());
        let expected: Vec<&str> = ALL_TOOLS
            .iter()
            .copied()
            .filter(|t| !denied.contains(t))
            .collect();
        assert_eq!(exposed(&exposure), expected);
        assert_eq!(expected.len(), 17);
    }
}
