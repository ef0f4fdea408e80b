//! A session's side of subscriptions and client roots: its narrowing
//! (`client_roots = "narrow"`, asked of the client with `roots/list`), the
//! `ResourceContext` its requests carry, and its watch of the roots.

use std::sync::Arc;

use rmcp::model::{ProtocolVersion, ResourceUpdatedNotificationParam};
use rmcp::service::{Peer, RequestContext};
use rmcp::{ErrorData, RoleServer};

use super::{ROOTS_WAIT, Server, client_of};
use crate::config::ClientRoots;
use crate::policy::Narrowing;
use crate::tools::{Change, Notifier, ResourceContext, Watch};

impl Server {
    /// The narrowing a request of this session is held to: `None` unless
    /// `client_roots = "narrow"` and the session is of the 2025 era. Waits
    /// for the client's roots, at most [`ROOTS_WAIT`]; unanswered, nothing.
    pub(super) async fn narrowing(
        &self,
        context: &RequestContext<RoleServer>,
    ) -> Result<Option<Arc<Narrowing>>, ErrorData> {
        let toolbox = self.toolbox().await?;
        if toolbox.config().client_roots != ClientRoots::Narrow || !legacy(context) {
            return Ok(None);
        }
        let mut known = self.narrowing.subscribe();
        let waited = tokio::time::timeout(ROOTS_WAIT, known.wait_for(Option::is_some)).await;
        Ok(Some(match waited {
            Ok(Ok(n)) => n.clone().unwrap_or_default(),
            _ => Arc::default(),
        }))
    }

    /// Who asks, with the session's narrowing.
    pub(super) async fn resource_cx(
        &self,
        context: &RequestContext<RoleServer>,
    ) -> Result<ResourceContext, ErrorData> {
        Ok(ResourceContext {
            cancel: context.ct.clone(),
            client: client_of(context),
            narrowing: self.narrowing(context).await?,
        })
    }

    /// Asks the client for its roots and narrows the session to them (a
    /// client without the `roots` capability, or that fails to answer, is
    /// served nothing).
    #[allow(deprecated)] // SEP-2577 deprecates roots as access control; here they only narrow
    pub(super) async fn refresh_roots(&self, peer: Peer<RoleServer>) {
        let Ok(toolbox) = self.toolbox().await else {
            return;
        };
        if toolbox.config().client_roots != ClientRoots::Narrow {
            return;
        }
        let declares = peer
            .peer_info()
            .is_some_and(|info| info.capabilities.roots.is_some());
        let uris: Vec<String> = match declares {
            true => match peer.list_roots().await {
                Ok(listed) => listed.roots.into_iter().map(|r| r.uri).collect(),
                Err(e) => {
                    tracing::warn!("the client's roots/list failed: {e}");
                    Vec::new()
                }
            },
            false => Vec::new(),
        };
        let narrowing = Arc::new(Narrowing::of_client_roots(&toolbox.config().roots, &uris));
        if let Some(watch) = self.watch.lock().await.as_ref() {
            watch.narrow(Some(Arc::clone(&narrowing)));
        }
        self.narrowing.send_replace(Some(narrowing));
    }

    /// The session's watch, started on first use; it hears list changes.
    pub(super) async fn session_watch(
        &self,
        peer: &Peer<RoleServer>,
        narrowing: Option<Arc<Narrowing>>,
    ) -> Result<Arc<Watch>, ErrorData> {
        let mut slot = self.watch.lock().await;
        let watch = match slot.as_ref() {
            Some(watch) => Arc::clone(watch),
            None => {
                let toolbox = self.toolbox().await?;
                let watch = Arc::new(toolbox.watch(peer_notifier(peer.clone())).await?);
                *slot = Some(Arc::clone(&watch));
                watch
            }
        };
        watch.narrow(narrowing);
        watch.hear_list_changes();
        Ok(watch)
    }
}

/// Whether the request is of the 2025 era (a session opened by
/// `initialize`).
pub(super) fn legacy(context: &RequestContext<RoleServer>) -> bool {
    context
        .protocol_version()
        .is_none_or(|v| v < ProtocolVersion::V_2026_07_28)
}

/// Sends a session's changes to its 2025-era client.
pub(super) fn peer_notifier(peer: Peer<RoleServer>) -> Notifier {
    Box::new(move |change| {
        let peer = peer.clone();
        Box::pin(async move {
            match change {
                Change::Updated(uri) => peer
                    .notify_resource_updated(ResourceUpdatedNotificationParam::new(uri))
                    .await
                    .is_ok(),
                Change::ListChanged => peer.notify_resource_list_changed().await.is_ok(),
            }
        })
    })
}
