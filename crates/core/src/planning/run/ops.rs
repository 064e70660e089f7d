//! The decision vocabulary: what a cluster looks like to a decider and the operations it may answer with.
//!
//! A decider (the LLM through `prompts/consolidate.md`, or the offline rules) receives one
//! [`ClusterDoc`] and answers with [`ProposedOp`]s. Nothing here touches disk; validation and
//! application live next door.

use chrono::NaiveDate;
use serde::{Deserialize, Serialize};

/// A current entry shown to the decider as context (and as a possible target).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Neighbor {
    pub id: String,
    pub content: String,
    pub first_seen: NaiveDate,
    pub updated: NaiveDate,
    #[serde(default)]
    pub pinned: bool,
}

/// A new (unconsolidated) fact to be decided.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Candidate {
    pub id: String,
    pub text: String,
    pub date: NaiveDate,
}

/// The JSON document one decision call sees (its shape is explained in `prompts/consolidate.md`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClusterDoc {
    pub neighbors: Vec<Neighbor>,
    pub candidates: Vec<Candidate>,
}

/// One operation as a decider proposes it, before validation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "UPPERCASE")]
pub enum Op {
    /// A new entry built from `facts`.
    Add {
        #[serde(default)]
        facts: Vec<String>,
        content: String,
    },
    /// `target` gets new content; its old version goes to history.
    Replace {
        target: String,
        #[serde(default)]
        facts: Vec<String>,
        content: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        why: Option<String>,
    },
    /// `target` is folded into the surviving entry `into` and leaves the current file.
    Remove {
        target: String,
        into: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        why: Option<String>,
    },
    /// `facts` say nothing `target` does not already say; they only join its sources.
    Duplicate {
        #[serde(default)]
        facts: Vec<String>,
        target: String,
    },
    /// `target` leaves the current file with no entry to fold into, as an undo on another
    /// machine took it back; its facts are pending again. Only memfold proposes it (a sync's
    /// plan for review); validation refuses it from a decider.
    Retire {
        target: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        why: Option<String>,
    },
    /// `target` has not been used for long (decay by use) and retires: it leaves the current
    /// file for history as `retired`, where its facts stay accounted for and `--history`
    /// finds it. Only memfold proposes it (`memfold sweep --stale`, a plan for review);
    /// validation refuses it from a decider.
    Stale {
        target: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        why: Option<String>,
    },
}

/// The kind of an op, as the decider's reply and every record name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum OpKind {
    Add,
    Replace,
    Remove,
    Duplicate,
    Retire,
    Stale,
}

impl OpKind {
    pub fn as_str(self) -> &'static str {
        match self {
            OpKind::Add => "ADD",
            OpKind::Replace => "REPLACE",
            OpKind::Remove => "REMOVE",
            OpKind::Duplicate => "DUPLICATE",
            OpKind::Retire => "RETIRE",
            OpKind::Stale => "STALE",
        }
    }
}

impl std::fmt::Display for OpKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Op {
    pub fn kind(&self) -> OpKind {
        match self {
            Op::Add { .. } => OpKind::Add,
            Op::Replace { .. } => OpKind::Replace,
            Op::Remove { .. } => OpKind::Remove,
            Op::Duplicate { .. } => OpKind::Duplicate,
            Op::Retire { .. } => OpKind::Retire,
            Op::Stale { .. } => OpKind::Stale,
        }
    }

    /// The fact ids this op accounts for.
    pub fn facts(&self) -> &[String] {
        match self {
            Op::Add { facts, .. } | Op::Replace { facts, .. } | Op::Duplicate { facts, .. } => facts,
            Op::Remove { .. } | Op::Retire { .. } | Op::Stale { .. } => &[],
        }
    }

    /// The op in a few words: its kind and the entries it names (`REMOVE m-1 into m-2`).
    pub fn label(&self) -> String {
        match (self, self.target()) {
            (Op::Remove { into, .. }, Some(target)) => format!("{} {target} into {into}", self.kind()),
            (_, Some(target)) => format!("{} {target}", self.kind()),
            (_, None) => self.kind().to_string(),
        }
    }

    /// The entry this op changes, if any.
    pub fn target(&self) -> Option<&str> {
        match self {
            Op::Add { .. } => None,
            Op::Replace { target, .. }
            | Op::Remove { target, .. }
            | Op::Duplicate { target, .. }
            | Op::Retire { target, .. }
            | Op::Stale { target, .. } => Some(target),
        }
    }
}

/// An op plus what the decider says about it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProposedOp {
    #[serde(flatten)]
    pub op: Op,
    /// Which rules or reasons fired (the offline decider always fills this).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub signals: Vec<String>,
    /// 0.0–1.0 when the decider offers one; low values go to review (docs/consolidation.md, "Review and undo").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confidence: Option<f64>,
    /// On ADD, REPLACE or DUPLICATE: entries of this call the op's entry is related to but
    /// distinct from (same person, pet, project…, another thing said of it). Both entries are
    /// kept and linked, each way.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub related: Vec<Related>,
}

/// An entry a decider links to: its id, or `{"id", "shares"}` with what the two share.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Related {
    Id(String),
    With {
        id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        shares: Option<String>,
    },
}

impl Related {
    pub fn id(&self) -> &str {
        match self {
            Related::Id(id) | Related::With { id, .. } => id,
        }
    }

    pub fn shares(&self) -> Option<&str> {
        match self {
            Related::Id(_) => None,
            Related::With { shares, .. } => shares.as_deref().filter(|s| !s.trim().is_empty()),
        }
    }
}

impl ProposedOp {
    pub fn new(op: Op) -> Self {
        ProposedOp { op, signals: Vec::new(), confidence: None, related: Vec::new() }
    }

    pub fn with_signals(op: Op, signals: Vec<String>) -> Self {
        ProposedOp { op, signals, confidence: None, related: Vec::new() }
    }
}

/// The decider's whole reply: `{"ops":[…]}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct OpsReply {
    #[serde(default)]
    pub ops: Vec<ProposedOp>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reply_parses_every_op_kind() {
        let reply: OpsReply = serde_json::from_str(
            r#"{"ops":[
              {"op":"ADD","facts":["f-1"],"content":"Lives in Lisbon."},
              {"op":"REPLACE","target":"m-1","facts":["f-2"],"content":"Now X; previously Y.","why":"update","confidence":0.4},
              {"op":"REMOVE","target":"m-2","into":"m-1","why":"merged"},
              {"op":"DUPLICATE","facts":["f-3"],"target":"m-1"}]}"#,
        )
        .unwrap();
        let kinds: Vec<_> = reply.ops.iter().map(|o| o.op.kind().as_str()).collect();
        assert_eq!(kinds, ["ADD", "REPLACE", "REMOVE", "DUPLICATE"]);
        assert_eq!(reply.ops[1].confidence, Some(0.4));
        assert_eq!(reply.ops[2].op.target(), Some("m-2"));
    }

    #[test]
    fn unknown_op_kind_is_an_error() {
        assert!(serde_json::from_str::<OpsReply>(r#"{"ops":[{"op":"MERGE","target":"m-1"}]}"#).is_err());
    }
}
