//! The MCP tools: one per verb of the [`Service`](crate::service::Service), each parsing typed arguments, making one call
//! and answering with compact text plus the CLI's `--json` document as structured content.
//!
//! Arguments are deserialised by rmcp before a tool runs: a missing field, a wrong type or an
//! unknown field (every argument struct denies them) is a tool error naming the field, and the
//! tool never runs. Every [`Error`] of the call is a tool error carrying the message the CLI
//! prints, with `{"error":{"code","message","ids"?}}` (as the HTTP API answers) in structured
//! content. A panic inside a tool is caught and answered as an internal JSON-RPC error, so no
//! request can take the server down. `tools/list` names the tools in alphabetical order (rmcp
//! sorts them), and `tests/mcp_tools.json` holds its whole answer.

use std::future::Future;
use std::panic::AssertUnwindSafe;

use futures::FutureExt;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock};
use rmcp::{ErrorData as McpError, tool, tool_router};
use serde_json::{Value, json};

use super::McpServer;
use crate::doors::render::{self as text, Reader};
use crate::service::{Door, PassAnswer};
use memfold_core::error::{Error, Kind};
use memfold_core::memory::text::{mask, mask_json};
use memfold_core::memory::views::PassOptions;
use memfold_core::memory::{TurnRequest, requests};

/// The MCP tools' reader: an agent.
const READER: Reader = Reader::Agent;
const DOOR: Door = Door::Mcp;

/// A tool's answer that is not a success: the tool error to send.
struct Refused(CallToolResult);

impl From<Error> for Refused {
    fn from(e: Error) -> Refused {
        Refused(refusal(&e))
    }
}

/// The tool error for `e`: its message as text, the HTTP API's error document as structured
/// content.
fn refusal(e: &Error) -> CallToolResult {
    if e.kind() == Kind::Internal {
        tracing::error!(error = %e, "tool failed");
    }
    tool_error(e.code(), e.to_string(), e.ids())
}

/// A tool error: `message` as text, `{"error":{"code","message","ids"?}}` as structured content.
fn tool_error(code: &str, message: String, ids: &[String]) -> CallToolResult {
    let message = mask(&message);
    let mut error = json!({"code": code, "message": message});
    if !ids.is_empty() {
        error["ids"] = json!(ids);
    }
    let mut result = CallToolResult::error(vec![ContentBlock::text(message)]);
    result.structured_content = Some(json!({ "error": error }));
    result
}

/// Run a tool's work: its text and JSON become a success, a refusal a tool error, a panic an
/// internal error.
async fn answer(work: impl Future<Output = Result<(String, Value), Refused>>) -> Result<CallToolResult, McpError> {
    match AssertUnwindSafe(work).catch_unwind().await {
        Ok(Ok((text, mut structured))) => {
            // What a tool answers goes to the agent's model: every secret in it masked,
            // whatever `ingest.secrets` let into the files.
            mask_json(&mut structured);
            let mut result = CallToolResult::success(vec![ContentBlock::text(mask(&text))]);
            result.structured_content = Some(structured);
            Ok(result)
        }
        Ok(Err(Refused(result))) => Ok(result),
        Err(panic) => {
            let what = memfold_store::sys::panic_message(&*panic);
            tracing::error!(panic = what, "tool panicked");
            Err(McpError::internal_error(format!("memfold failed inside the tool: {what}"), None))
        }
    }
}

/// Answer with the result of one [`Service`](crate::service::Service) call, rendered by `render` as (text, structured
/// content).
async fn reply<T>(
    work: impl Future<Output = Result<T, Error>>,
    render: impl FnOnce(&T) -> (String, Value),
) -> Result<CallToolResult, McpError> {
    answer(async move { Ok(render(&work.await?)) }).await
}

#[tool_router(router = tool_router, vis = "pub(super)")]
impl McpServer {
    #[tool(
        description = "Remember facts: each is one self-contained sentence, stored at once and searchable; \
                       a later consolidation pass folds it into memory. Returns the fact ids.",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    async fn memory_add(&self, Parameters(args): Parameters<requests::Add>) -> Result<CallToolResult, McpError> {
        let facts = args.facts();
        reply(async { self.service().await?.add(DOOR, facts).await }, |added| (text::stored(added), json!(added))).await
    }

    #[tool(
        description = "Give a conversation turn (text, or chat messages): memfold's LLM picks out the facts \
                       worth remembering and stores them like memory_add, all or none. Needs an LLM configured.",
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = false, open_world_hint = true)
    )]
    async fn memory_add_turn(&self, Parameters(args): Parameters<TurnRequest>) -> Result<CallToolResult, McpError> {
        answer(async move {
            let added = self.service().await?.add_turn(DOOR, args.try_into()?).await?;
            Ok((text::stored(&added), json!(added)))
        })
        .await
    }

    #[tool(
        description = "Search long-term memory: current entries and facts not yet consolidated (with \
                       include_history, superseded versions too), best first, with ids. Changes no memory; \
                       memfold logs which entries were returned, to rank MEMORY.md.",
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn memory_search(&self, Parameters(args): Parameters<requests::Search>) -> Result<CallToolResult, McpError> {
        let (query, request) = args.split();
        reply(async { self.service().await?.search(DOOR, &query, &request).await }, |hits| {
            (text::hits(hits), json!({ "hits": hits }))
        })
        .await
    }

    #[tool(
        description = "One entry by id with its chain of versions: what it replaced or absorbed, what \
                       replaced it, and when.",
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn memory_get(&self, Parameters(args): Parameters<requests::EntryId>) -> Result<CallToolResult, McpError> {
        reply(async { self.service().await?.history(DOOR, &args.id).await }, |chain| (text::chain(chain), json!(chain)))
            .await
    }

    #[tool(
        description = "Everything memory holds about a person, pet, place or project: the entries that \
                       name it and those linked to them; without a name, the names memory speaks of.",
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn memory_about(&self, Parameters(args): Parameters<requests::About>) -> Result<CallToolResult, McpError> {
        reply(async { self.service().await?.about(DOOR, args.name.as_deref(), args.history).await }, |answer| {
            (text::about(answer), json!(answer))
        })
        .await
    }

    #[tool(
        description = "Forget an entry, or a fact not yet consolidated, for good: it moves to history as \
                       deleted and never comes back, even if the same text is added again.",
        annotations(read_only_hint = false, destructive_hint = true, idempotent_hint = true, open_world_hint = false)
    )]
    async fn memory_forget(&self, Parameters(args): Parameters<requests::Forget>) -> Result<CallToolResult, McpError> {
        reply(async { self.service().await?.forget(DOOR, &args.id, args.reason.as_deref()).await }, |done| {
            (text::forgotten(done), json!(done))
        })
        .await
    }

    #[tool(
        description = "Pin an entry: consolidation never replaces or removes it.",
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn memory_pin(&self, Parameters(args): Parameters<requests::EntryId>) -> Result<CallToolResult, McpError> {
        self.set_pin(args.id, true).await
    }

    #[tool(
        description = "Unpin an entry: consolidation may replace or remove it again.",
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn memory_unpin(&self, Parameters(args): Parameters<requests::EntryId>) -> Result<CallToolResult, McpError> {
        self.set_pin(args.id, false).await
    }

    #[tool(
        description = "Share an entry with every space of the home: copy it into a shared space as a new fact \
                       whose source names this space and the entry. This space's memory is unchanged.",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    async fn memory_share(&self, Parameters(args): Parameters<requests::Share>) -> Result<CallToolResult, McpError> {
        reply(async { self.service().await?.share(DOOR, &args.id, &args.to).await }, |added| {
            (text::stored(added), json!(added))
        })
        .await
    }

    #[tool(
        description = "Fold pending facts into memory now: ADD, REPLACE, REMOVE or DUPLICATE ops, decided by \
                       the LLM (or offline rules) and undoable with memory_undo. Runs only when enough facts \
                       wait, unless force = true; dry_run = true shows the ops and writes nothing.",
        annotations(read_only_hint = false, destructive_hint = true, idempotent_hint = false, open_world_hint = true)
    )]
    async fn memory_consolidate(
        &self,
        Parameters(args): Parameters<requests::Consolidate>,
    ) -> Result<CallToolResult, McpError> {
        let opts = PassOptions { force: args.force, dry_run: args.dry_run };
        reply(async { self.service().await?.consolidate(DOOR, opts).await }, |answer| match answer {
            PassAnswer::Done(report) => (text::pass(report, READER), json!(report)),
            PassAnswer::Running(running) => (running.message.clone(), json!(running)),
        })
        .await
    }

    #[tool(
        description = "Whether a consolidation pass would run now (and why not), facts pending, entries in \
                       memory, and the last run.",
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn memory_status(&self) -> Result<CallToolResult, McpError> {
        reply(async { self.service().await?.status(DOOR).await }, |status| {
            (text::status(&status.status, READER), json!(status))
        })
        .await
    }

    #[tool(
        description = "Plans waiting for review (consolidation in review mode, or ops the LLM was unsure of), \
                       with their ops and a diff of memory.md.",
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn memory_plans(&self) -> Result<CallToolResult, McpError> {
        reply(async { self.service().await?.plans(DOOR).await }, |plans| {
            (text::plans(plans), json!({ "plans": plans }))
        })
        .await
    }

    #[tool(
        description = "One stored plan in op groups (ops that share a fact or an entry): each group's facts, \
                       its ops with reasons and confidence, each entry before and after, and the entries \
                       the decider weighed and left alone.",
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn memory_plan(&self, Parameters(args): Parameters<requests::PlanId>) -> Result<CallToolResult, McpError> {
        reply(async { self.service().await?.plan(DOOR, &args.plan).await }, |detail| {
            (text::plan_detail(detail), json!(detail))
        })
        .await
    }

    #[tool(
        description = "Apply a stored plan exactly as memory_plans shows it (replayed on top if only other \
                       entries changed since), or only some of its op groups (groups, as memory_plan numbers \
                       them), rejecting the rest.",
        annotations(read_only_hint = false, destructive_hint = true, idempotent_hint = false, open_world_hint = true)
    )]
    async fn memory_apply_plan(
        &self,
        Parameters(args): Parameters<requests::Apply>,
    ) -> Result<CallToolResult, McpError> {
        let note = args.note.clone();
        reply(
            async { self.service().await?.apply_plan(DOOR, &args.plan, args.groups, note.as_deref()).await },
            |applied| (text::applied(applied, READER), json!(applied)),
        )
        .await
    }

    #[tool(
        description = "Reject a stored plan: nothing is written, and its facts stay pending until a forced pass.",
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn memory_reject_plan(
        &self,
        Parameters(args): Parameters<requests::Reject>,
    ) -> Result<CallToolResult, McpError> {
        reply(async { self.service().await?.reject_plan(DOOR, &args.plan, args.note.as_deref()).await }, |rejected| {
            (text::rejected(rejected, READER), json!(rejected))
        })
        .await
    }

    #[tool(
        description = "Applied consolidation runs, oldest first: ops by kind, facts, whether undone.",
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn memory_runs(&self) -> Result<CallToolResult, McpError> {
        reply(async { self.service().await?.runs(DOOR).await }, |runs| (text::runs(runs), json!({ "runs": runs })))
            .await
    }

    #[tool(
        description = "One applied run: its ops in groups, numbered as memory_undo's ops and groups take them.",
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn memory_run(&self, Parameters(args): Parameters<requests::RunId>) -> Result<CallToolResult, McpError> {
        reply(async { self.service().await?.run(DOOR, &args.run).await }, |detail| {
            (text::run_detail(detail), json!(detail))
        })
        .await
    }

    #[tool(
        description = "Merge entries the person says are one: the first stays with a text that says what all of \
                       them say (text, else the LLM's, else the texts joined), the others go to history as \
                       merged into it. Undoable with memory_undo.",
        annotations(read_only_hint = false, destructive_hint = true, idempotent_hint = false, open_world_hint = true)
    )]
    async fn memory_merge(&self, Parameters(args): Parameters<requests::Merge>) -> Result<CallToolResult, McpError> {
        reply(
            async { self.service().await?.merge(DOOR, &args.ids(), args.text.as_deref(), args.note.as_deref()).await },
            |done| (text::curated(done, READER), json!(done)),
        )
        .await
    }

    #[tool(
        description = "Supersede an out-of-date entry by another entry (with) or by a new text (text): the old \
                       version goes to history, superseded. Undoable with memory_undo.",
        annotations(read_only_hint = false, destructive_hint = true, idempotent_hint = false, open_world_hint = false)
    )]
    async fn memory_supersede(
        &self,
        Parameters(args): Parameters<requests::Supersede>,
    ) -> Result<CallToolResult, McpError> {
        reply(
            async {
                let by = args.successor()?;
                self.service().await?.supersede(DOOR, &args.id, by, args.note.as_deref()).await
            },
            |done| (text::curated(done, READER), json!(done)),
        )
        .await
    }

    #[tool(
        description = "Undo an applied run, or only some of its ops or op groups (as memory_run numbers them): the \
                       entries they changed go back to their earlier versions and the ones they added are \
                       removed; refused, naming them, if they changed since.",
        annotations(read_only_hint = false, destructive_hint = true, idempotent_hint = false, open_world_hint = true)
    )]
    async fn memory_undo(&self, Parameters(args): Parameters<requests::UndoRun>) -> Result<CallToolResult, McpError> {
        let run = args.run.clone();
        let what = args.what();
        reply(async { self.service().await?.undo(DOOR, &run, &what).await }, |undone| {
            (text::undone(undone, READER), json!(undone))
        })
        .await
    }
}

impl McpServer {
    async fn set_pin(&self, id: String, pinned: bool) -> Result<CallToolResult, McpError> {
        reply(async { self.service().await?.pin(DOOR, &id, pinned).await }, |done| {
            (text::pinned(&done.id, done.pinned), json!(done))
        })
        .await
    }
}
