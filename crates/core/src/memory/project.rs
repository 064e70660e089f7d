//! Which space of a home holds a project's memory: one space per repository (its work trees and
//! clones share it, named from its remote), made on first use when `spaces.auto_create` is on.

use memfold_store::config::Config;
use memfold_store::home::Home;
pub use memfold_store::project::Project;

/// The space a project's memory is in, and what a person should know of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProjectSpace {
    pub name: String,
    /// Said on stderr by the door that asked: spaces an older memfold made for other work trees
    /// or clones of the same repository (with the command that joins them), a project the space
    /// could not record.
    pub notes: Vec<String>,
}

/// The space of `home` that holds `project`'s memory, made now (with its token) if it is new and
/// `spaces.auto_create` is on.
pub fn project_space(config: &Config, home: &Home, project: &Project) -> Result<ProjectSpace, String> {
    let found = home.space_for_project(project);
    let space = found.name;
    let root = home.space(&space)?;
    if !found.exists {
        if !config.spaces.auto_create {
            return Err(format!(
                "no space {space} for the project {} in the home {}: `memfold --home {} --space {space} init` makes it, \
                 or set spaces.auto_create = true",
                project.top.display(),
                home.dir().display(),
                home.dir().display()
            ));
        }
        root.init().map_err(|e| format!("making space {space}: {e}"))?;
        memfold_store::token::ensure(&root.token_file()).map_err(|e| e.to_string())?;
    }
    let mut notes = Vec::new();
    if let Err(e) = home.record_project(&space, &project.identity()) {
        notes.push(format!("space {space} does not record its project: {e}"));
    }
    for other in &found.also {
        notes.push(format!(
            "space {other} also holds memory of this repository (made for another work tree or clone): \
             `memfold --home {} spaces --merge {space} {other}` joins it into {space}",
            home.dir().display()
        ));
    }
    Ok(ProjectSpace { name: space, notes })
}
