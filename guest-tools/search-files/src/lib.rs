//! `search_files`: files whose path matches a glob, optionally holding some
//! bytes or a regular expression, under a directory of a root. The search
//! is `loomfs_search`'s; this component runs it on files only, and refuses
//! `documents: true`, which the server routes to the document reader's
//! component (it carries the parsers).

use loomfs_guest::{Answer, Context, ToolError};
use loomfs_search::{Args, Found};

loomfs_guest::tool!(SearchFiles(Args) -> Found, loomfs_search::about());

fn call(ctx: Context, args: Args) -> Result<Answer<Found>, ToolError> {
    loomfs_search::call(ctx, args, None)
}
