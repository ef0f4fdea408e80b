//! Reading a call's result out of the guest without letting it cost the
//! host more than `max_output_bytes`.
//!
//! A component returns its result in its own linear memory; lifting it into
//! the host copies every string and list. A hostile component could return
//! a gigabyte of text (as much as its memory cap allows), and the host would
//! take it all in before it could look at its size, then parse it. So the
//! result is lifted through types of this module instead of the generated
//! ones: each string and list reads its length from the canonical ABI's
//! pointer pair first and is copied only while the call's budget
//! ([`with_budget`]) still holds it; past the budget nothing more is copied
//! and the result is refused whole. The host never holds more of a result
//! than the limit (plus a small, bounded overhead per list element).
//!
//! These types implement wasmtime's `ComponentType` and `Lift` by hand, by
//! delegating to its own `String` and `Vec<u8>` implementations once the
//! length is known: the traits' hidden items are stable within the
//! wasmtime 48 LTS line this crate is pinned to.

use std::cell::Cell;

use wasmtime::ValRaw;
use wasmtime::component::__internal::{CanonicalAbiInfo, InstanceType, InterfaceType, LiftContext};
use wasmtime::component::{ComponentType, Lift};

use super::bindings;

thread_local! {
    /// Bytes the result being lifted on this thread may still take, and
    /// whether something did not fit.
    static BUDGET: Cell<(u64, bool)> = const { Cell::new((0, false)) };
}

/// Runs `lift` (a guest call whose result is lifted on this thread) with
/// `limit` bytes of budget; returns its value and whether the result went
/// over the budget (then parts of it were not copied: see [`Text`]).
pub fn with_budget<T>(limit: u64, lift: impl FnOnce() -> T) -> (T, bool) {
    BUDGET.with(|b| b.set((limit, false)));
    let value = lift();
    let over = BUDGET.with(|b| b.replace((0, false)).1);
    (value, over)
}

/// Takes `bytes` from the budget; `false` (and the result marked over) if
/// they do not fit.
fn take(bytes: u64) -> bool {
    BUDGET.with(|b| {
        let (left, over) = b.get();
        match left.checked_sub(bytes) {
            Some(rest) if !over => {
                b.set((rest, false));
                true
            }
            _ => {
                b.set((0, true));
                false
            }
        }
    })
}

/// Host bytes a lifted string of `len` code units may take: UTF-8 as is.
/// Transcoded, each unit can become up to three UTF-8 bytes (two for
/// latin-1) in a string that grows by doubling on its way: twice that.
fn string_cost(cx: &LiftContext<'_>, len: u32) -> u64 {
    use wasmtime::component::__internal::wasmtime_environ::component::StringEncoding;
    const UTF16_TAG: u32 = 1 << 31;
    let units = |n: u32| u64::from(n);
    match cx.options().string_encoding {
        StringEncoding::Utf8 => units(len),
        StringEncoding::Utf16 => units(len) * 6,
        // Compact UTF-16 tags its length's top bit when it holds UTF-16,
        // and is latin-1 otherwise.
        StringEncoding::CompactUtf16 if len & UTF16_TAG != 0 => units(len ^ UTF16_TAG) * 6,
        StringEncoding::CompactUtf16 => units(len) * 4,
    }
}

/// A string of the result: copied if it fit the budget, `None` if not.
pub struct Text(pub Option<String>);

unsafe impl ComponentType for Text {
    type Lower = [ValRaw; 2];
    const ABI: CanonicalAbiInfo = CanonicalAbiInfo::POINTER_PAIR;

    fn typecheck(ty: &InterfaceType, types: &InstanceType<'_>) -> wasmtime::Result<()> {
        <String as ComponentType>::typecheck(ty, types)
    }
}

unsafe impl Lift for Text {
    fn linear_lift_from_flat(
        cx: &mut LiftContext<'_>,
        ty: InterfaceType,
        src: &Self::Lower,
    ) -> wasmtime::Result<Self> {
        if !take(string_cost(cx, src[1].get_u32())) {
            return Ok(Text(None));
        }
        String::linear_lift_from_flat(cx, ty, src).map(|s| Text(Some(s)))
    }

    fn linear_lift_from_memory(
        cx: &mut LiftContext<'_>,
        ty: InterfaceType,
        bytes: &[u8],
    ) -> wasmtime::Result<Self> {
        if !take(string_cost(cx, pair_len(bytes)?)) {
            return Ok(Text(None));
        }
        String::linear_lift_from_memory(cx, ty, bytes).map(|s| Text(Some(s)))
    }
}

/// The length half of a pointer pair in memory (pointer, then length, both
/// little-endian u32).
fn pair_len(bytes: &[u8]) -> wasmtime::Result<u32> {
    let len: [u8; 4] = bytes
        .get(4..8)
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| wasmtime::Error::msg("pointer pair out of bounds"))?;
    Ok(u32::from_le_bytes(len))
}

/// A `list<u8>` of the result: copied if it fit the budget.
pub struct Bytes(pub Option<Vec<u8>>);

unsafe impl ComponentType for Bytes {
    type Lower = [ValRaw; 2];
    const ABI: CanonicalAbiInfo = CanonicalAbiInfo::POINTER_PAIR;

    fn typecheck(ty: &InterfaceType, types: &InstanceType<'_>) -> wasmtime::Result<()> {
        <Vec<u8> as ComponentType>::typecheck(ty, types)
    }
}

unsafe impl Lift for Bytes {
    fn linear_lift_from_flat(
        cx: &mut LiftContext<'_>,
        ty: InterfaceType,
        src: &Self::Lower,
    ) -> wasmtime::Result<Self> {
        if !take(u64::from(src[1].get_u32())) {
            return Ok(Bytes(None));
        }
        Vec::<u8>::linear_lift_from_flat(cx, ty, src).map(|v| Bytes(Some(v)))
    }

    fn linear_lift_from_memory(
        cx: &mut LiftContext<'_>,
        ty: InterfaceType,
        bytes: &[u8],
    ) -> wasmtime::Result<Self> {
        if !take(u64::from(pair_len(bytes)?)) {
            return Ok(Bytes(None));
        }
        Vec::<u8>::linear_lift_from_memory(cx, ty, bytes).map(|v| Bytes(Some(v)))
    }
}

/// A list of the result whose elements are lifted only if the host memory
/// they take (`size_of::<T>()` each, before their own contents) fits the
/// budget: a list of a billion empty strings costs nothing to the guest
/// and 32 GB to a host that lifts it blindly.
pub struct List<T>(pub Option<Vec<T>>);

unsafe impl<T: ComponentType> ComponentType for List<T> {
    type Lower = [ValRaw; 2];
    const ABI: CanonicalAbiInfo = CanonicalAbiInfo::POINTER_PAIR;

    fn typecheck(ty: &InterfaceType, types: &InstanceType<'_>) -> wasmtime::Result<()> {
        <Vec<T> as ComponentType>::typecheck(ty, types)
    }
}

fn list_cost<T>(len: u32) -> u64 {
    u64::from(len).saturating_mul(std::mem::size_of::<T>() as u64)
}

unsafe impl<T: Lift> Lift for List<T> {
    fn linear_lift_from_flat(
        cx: &mut LiftContext<'_>,
        ty: InterfaceType,
        src: &Self::Lower,
    ) -> wasmtime::Result<Self> {
        if !take(list_cost::<T>(src[1].get_u32())) {
            return Ok(List(None));
        }
        Vec::<T>::linear_lift_from_flat(cx, ty, src).map(|v| List(Some(v)))
    }

    fn linear_lift_from_memory(
        cx: &mut LiftContext<'_>,
        ty: InterfaceType,
        bytes: &[u8],
    ) -> wasmtime::Result<Self> {
        if !take(list_cost::<T>(pair_len(bytes)?)) {
            return Ok(List(None));
        }
        Vec::<T>::linear_lift_from_memory(cx, ty, bytes).map(|v| List(Some(v)))
    }
}

/// `output` of `wit/tool.wit`, lifted under the budget.
#[derive(ComponentType, Lift)]
#[component(record)]
pub struct GuestOutput {
    text: List<Text>,
    structured: Option<Text>,
    images: List<GuestImage>,
}

/// `image` of `wit/tool.wit`, lifted under the budget.
#[derive(ComponentType, Lift)]
#[component(record)]
pub struct GuestImage {
    #[component(name = "mime-type")]
    mime_type: Text,
    data: Bytes,
}

/// `tool-error` of `wit/tool.wit`, lifted under the budget.
#[derive(ComponentType, Lift)]
#[component(variant)]
pub enum GuestError {
    #[component(name = "invalid-arguments")]
    InvalidArguments(Text),
    #[component(name = "not-found")]
    NotFound(Text),
    #[component(name = "refused")]
    Refused(Text),
    #[component(name = "io")]
    Io(Text),
}

/// What `call` returns, lifted under the budget.
pub type GuestResult = Result<GuestOutput, GuestError>;

/// The result as the generated types, or `None` if any part of it did not
/// fit the budget.
pub fn owned(result: GuestResult) -> Option<Result<bindings::Output, bindings::ToolError>> {
    fn all<T, U>(list: List<T>, f: impl Fn(T) -> Option<U>) -> Option<Vec<U>> {
        list.0?.into_iter().map(f).collect()
    }
    Some(match result {
        Ok(out) => Ok(bindings::Output {
            text: all(out.text, |t| t.0)?,
            structured: match out.structured {
                Some(Text(s)) => Some(s?),
                None => None,
            },
            images: all(out.images, |i| {
                Some(bindings::Image {
                    mime_type: i.mime_type.0?,
                    data: i.data.0?,
                })
            })?,
        }),
        Err(e) => Err(match e {
            GuestError::InvalidArguments(t) => bindings::ToolError::InvalidArguments(t.0?),
            GuestError::NotFound(t) => bindings::ToolError::NotFound(t.0?),
            GuestError::Refused(t) => bindings::ToolError::Refused(t.0?),
            GuestError::Io(t) => bindings::ToolError::Io(t.0?),
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_is_taken_until_it_runs_out() {
        let ((), over) = with_budget(10, || {
            assert!(take(4));
            assert!(take(6));
            assert!(!take(1));
            // Once over, nothing more fits, even what would.
            assert!(!take(0));
        });
        assert!(over);
        let ((), over) = with_budget(10, || assert!(take(10)));
        assert!(!over);
        // Nothing is left for a lift outside a budget.
        assert!(!take(1));
    }
}
