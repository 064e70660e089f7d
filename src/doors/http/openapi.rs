//! The HTTP API as an OpenAPI 3.1 document (`GET /openapi.json`), generated from the request
//! types the handlers deserialise (`memory::requests`), so it cannot drift from what they take.
//! [`OPERATIONS`] lists every route of the router (`openapi_lists_every_route` reads the router
//! to check it).

use schemars::JsonSchema;
use serde_json::{Map, Value, json};

use memfold_core::memory::{TurnRequest, requests};

/// Where an operation's input comes from.
#[derive(Clone, Copy)]
enum Input {
    /// Nothing but its path.
    None,
    /// A JSON body of this schema.
    Body(fn() -> Value),
    /// Query parameters, the properties of this schema.
    Query(fn() -> Value),
}

/// One route and method of the API.
struct Operation {
    method: &'static str,
    path: &'static str,
    summary: &'static str,
    input: Input,
    /// The request field the path's `{id}` fills (left out of the body or query).
    path_field: Option<&'static str>,
    /// Answered without the bearer token.
    open: bool,
}

const fn op(method: &'static str, path: &'static str, summary: &'static str, input: Input) -> Operation {
    Operation { method, path, summary, input, path_field: None, open: false }
}

const fn on(field: &'static str, operation: Operation) -> Operation {
    Operation { path_field: Some(field), ..operation }
}

/// Every operation of the API, in the router's order.
const OPERATIONS: &[Operation] = &[
    Operation { open: true, ..op("get", "/healthz", "Whether the daemon answers, and its version", Input::None) },
    Operation { open: true, ..op("get", "/openapi.json", "This document", Input::None) },
    op("post", "/facts", "Append facts to the archive, searchable at once", Input::Body(schema::<requests::Add>)),
    op("post", "/turns", "Extract the facts of a conversation turn (needs an LLM)", Input::Body(schema::<TurnRequest>)),
    op("post", "/turns/spooled", "Extract the turns the agent hooks spooled, in the background", Input::None),
    op("get", "/search", "Hybrid search, best first", Input::Query(schema::<requests::Search>)),
    op("post", "/recall", "What an agent is handed for a prompt", Input::Body(schema::<requests::Recall>)),
    op("post", "/consolidate", "Run a consolidation pass", Input::Body(schema::<requests::Consolidate>)),
    op("get", "/status", "The gate, pending facts, entries, the last run", Input::None),
    op("get", "/entries", "The current entries", Input::None),
    on("id", op("get", "/entries/{id}", "One entry", Input::None)),
    on(
        "id",
        op("delete", "/entries/{id}", "Forget an entry or a pending fact", Input::Query(schema::<requests::Forget>)),
    ),
    on("id", op("get", "/entries/{id}/history", "An entry's chain of versions", Input::None)),
    op("get", "/about", "The entries about a name; without one, the names", Input::Query(schema::<requests::About>)),
    on("id", op("post", "/entries/{id}/pin", "Pin an entry", Input::None)),
    on("id", op("post", "/entries/{id}/unpin", "Unpin an entry", Input::None)),
    on(
        "id",
        op("post", "/entries/{id}/share", "Copy an entry into a shared space", Input::Body(schema::<requests::Share>)),
    ),
    on("id", op("post", "/entries/{id}/merge", "Merge entries into this one", Input::Body(schema::<requests::Merge>))),
    on("id", op("post", "/entries/{id}/supersede", "Supersede this entry", Input::Body(schema::<requests::Supersede>))),
    on("id", op("get", "/facts/{id}", "One archived fact and where it went", Input::None)),
    op(
        "post",
        "/reindex",
        "Catch the index up with the files, or rebuild it",
        Input::Body(schema::<requests::Reindex>),
    ),
    op(
        "post",
        "/sweep",
        "Compare entries with each other; store what is found as a plan",
        Input::Body(schema::<requests::Sweep>),
    ),
    op("get", "/runs", "Applied runs", Input::None),
    on("run", op("get", "/runs/{id}", "One applied run in op groups", Input::None)),
    on(
        "run",
        op("post", "/runs/{id}/undo", "Undo a run, or some of its ops", Input::Body(schema::<requests::UndoRun>)),
    ),
    op("get", "/plans", "Plans waiting for review", Input::None),
    on("plan", op("get", "/plans/{id}", "One stored plan in op groups", Input::None)),
    on(
        "plan",
        op("post", "/plans/{id}/apply", "Apply a stored plan, or some of it", Input::Body(schema::<requests::Apply>)),
    ),
    on("plan", op("post", "/plans/{id}/reject", "Reject a stored plan", Input::Body(schema::<requests::Reject>))),
    op("get", "/metrics", "Prometheus metrics", Input::None),
    op("get", "/spaces", "The spaces of a home (the home's token)", Input::None),
    op("post", "/mcp", "The MCP server of the token's space (streamable HTTP): a message", Input::None),
    op("get", "/mcp", "The MCP server's stream of messages to the client", Input::None),
    op("delete", "/mcp", "End an MCP session", Input::None),
];

/// A type's JSON Schema, every subschema inline (so the document holds no reference to resolve).
fn schema<T: JsonSchema>() -> Value {
    let settings = schemars::generate::SchemaSettings::draft2020_12().with(|s| s.inline_subschemas = true);
    let mut value = settings.into_generator().into_root_schema_for::<T>().to_value();
    if let Some(map) = value.as_object_mut() {
        map.remove("$schema");
    }
    value
}

/// `schema` without the property the path fills.
fn without(mut schema: Value, field: Option<&str>) -> Value {
    if let Some(field) = field {
        if let Some(properties) = schema.get_mut("properties").and_then(Value::as_object_mut) {
            properties.remove(field);
        }
        if let Some(required) = schema.get_mut("required").and_then(Value::as_array_mut) {
            required.retain(|r| r != field);
        }
    }
    schema
}

fn operation(o: &Operation) -> Value {
    let mut parameters: Vec<Value> = o
        .path
        .split('/')
        .filter_map(|part| part.strip_prefix('{').and_then(|p| p.strip_suffix('}')))
        .map(|name| json!({"name": name, "in": "path", "required": true, "schema": {"type": "string"}}))
        .collect();
    let mut out = Map::new();
    out.insert("summary".into(), json!(o.summary));
    out.insert("operationId".into(), json!(format!("{}{}", o.method, o.path.replace(['/', '{', '}', '.'], "_"))));
    match o.input {
        Input::None => {}
        Input::Body(schema) => {
            let body = without(schema(), o.path_field);
            out.insert(
                "requestBody".into(),
                json!({"required": false, "content": {"application/json": {"schema": body}}}),
            );
        }
        Input::Query(schema) => {
            let schema = without(schema(), o.path_field);
            let required: Vec<&str> =
                schema["required"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
            for (name, property) in schema["properties"].as_object().into_iter().flatten() {
                let mut parameter = json!({"name": name, "in": "query", "required": required.contains(&name.as_str())});
                let mut property = property.clone();
                if let Some(description) = property.as_object_mut().and_then(|p| p.remove("description")) {
                    parameter["description"] = description;
                }
                parameter["schema"] = property;
                parameters.push(parameter);
            }
        }
    }
    if !parameters.is_empty() {
        out.insert("parameters".into(), Value::Array(parameters));
    }
    if o.open {
        out.insert("security".into(), json!([]));
    }
    out.insert(
        "responses".into(),
        json!({
            "200": {"description": "The answer, as the CLI's --json prints it", "content": {"application/json": {"schema": {}}}},
            "default": {"description": "An error", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}},
        }),
    );
    Value::Object(out)
}

/// The whole document.
pub fn document() -> Value {
    let mut paths = Map::new();
    for o in OPERATIONS {
        let item = paths.entry(o.path).or_insert_with(|| json!({}));
        item[o.method] = operation(o);
    }
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "memfold",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "An AI agent's long-term memory as plain markdown, consolidated in the background. \
                            A home's daemon serves each space under /spaces/{name}/ to the home's token.",
        },
        "servers": [{"url": "http://127.0.0.1:7878"}],
        "security": [{"bearer": []}],
        "paths": paths,
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {
                "Error": {
                    "type": "object",
                    "required": ["error"],
                    "properties": {"error": {
                        "type": "object",
                        "required": ["code", "message"],
                        "properties": {
                            "code": {"type": "string"},
                            "message": {"type": "string"},
                            "ids": {"type": "array", "items": {"type": "string"}},
                        },
                    }},
                },
            },
        },
    })
}
