//! Namespaces: isolated sets of services. `public` always exists; others are declared
//! through the API (Raft data) or come into being when a client first uses them, as Nacos
//! naming does not require a namespace to be declared.

use std::sync::Arc;

use arc_swap::ArcSwapOption;
use dashmap::DashMap;
use serde::{Deserialize, Serialize};

use super::service::Service;

/// The namespace every request without a `namespaceId` uses.
pub const PUBLIC_NAMESPACE: &str = "public";

/// A declared namespace's name and description.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NamespaceInfo {
    /// Id, used in `namespaceId` parameters.
    pub id: String,
    /// Display name.
    pub name: String,
    /// Description.
    pub description: String,
}

/// A namespace and its services.
#[derive(Debug)]
pub struct Namespace {
    /// The namespace id.
    pub id: Arc<str>,
    /// Declared name and description; `None` for a namespace only used by clients.
    info: ArcSwapOption<NamespaceInfo>,
    /// Services by `group@@name`.
    pub services: DashMap<Arc<str>, Arc<Service>>,
}

impl Namespace {
    /// An empty, undeclared namespace.
    pub fn new(id: &str) -> Self {
        Self {
            id: id.into(),
            info: ArcSwapOption::empty(),
            services: DashMap::new(),
        }
    }

    /// The declared info; `public` always has one.
    pub fn info(&self) -> Option<Arc<NamespaceInfo>> {
        self.info.load_full()
    }

    /// Name and description to show, declared or not.
    pub fn display(&self) -> NamespaceInfo {
        match self.info() {
            Some(info) => NamespaceInfo::clone(&info),
            None if &*self.id == PUBLIC_NAMESPACE => NamespaceInfo {
                id: PUBLIC_NAMESPACE.into(),
                name: PUBLIC_NAMESPACE.into(),
                description: "Default Namespace".into(),
            },
            None => NamespaceInfo {
                id: self.id.to_string(),
                name: self.id.to_string(),
                description: String::new(),
            },
        }
    }

    pub(crate) fn set_info(&self, info: Option<NamespaceInfo>) {
        self.info.store(info.map(Arc::new));
    }
}
