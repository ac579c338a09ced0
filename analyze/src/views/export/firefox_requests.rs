//! Sampled requests (`record --follow`) in the Firefox Profiler: a process of its own,
//! "sampled requests", with one track per layer; each request's marker on a layer's track
//! spans from the layer before it (the call's entry for the first) to its pass there,
//! labelled `S<id>`.

use fx::{
    CategoryColor, CategoryHandle, MarkerFieldFlags, MarkerFieldFormat, StaticSchemaMarker,
    StaticSchemaMarkerField, StringHandle,
};
use fxprof_processed_profile as fx;

use super::spans::{Span, SpanKind};
use crate::aggregate::requests::SampledRequest;
use format::events::RequestLayer;

/// The pseudo process of the layers' tracks: past any pid the kernel gives (pid_max is at
/// most 2^22), so it never names a real one; each layer's track is this + 1 + its number.
pub const REQUESTS_PID: i32 = (1 << 22) + 1;

/// What the Profiler draws for a request reaching a layer.
pub(super) struct RequestMarker {
    pub label: StringHandle,
    pub caller: StringHandle,
    pub bytes: f64,
}

impl StaticSchemaMarker for RequestMarker {
    const UNIQUE_MARKER_TYPE_NAME: &'static str = "SampledRequest";
    const DESCRIPTION: Option<&'static str> =
        Some("A sampled request (record --follow) on its way to this layer.");
    const CHART_LABEL: Option<&'static str> = Some("{marker.data.label}");
    const TOOLTIP_LABEL: Option<&'static str> =
        Some("{marker.data.label} of {marker.data.caller}: {marker.data.bytes}");
    const TABLE_LABEL: Option<&'static str> =
        Some("{marker.data.label} of {marker.data.caller}: {marker.data.bytes}");
    const FIELDS: &'static [StaticSchemaMarkerField] = &[
        StaticSchemaMarkerField {
            key: "label",
            label: "Request",
            format: MarkerFieldFormat::String,
            flags: MarkerFieldFlags::SEARCHABLE,
        },
        StaticSchemaMarkerField {
            key: "caller",
            label: "Caller",
            format: MarkerFieldFormat::String,
            flags: MarkerFieldFlags::SEARCHABLE,
        },
        StaticSchemaMarkerField {
            key: "bytes",
            label: "Bytes",
            format: MarkerFieldFormat::Bytes,
            flags: MarkerFieldFlags::empty(),
        },
    ];

    fn name(&self, profile: &mut fx::Profile) -> StringHandle {
        profile.intern_string("request")
    }

    fn category(&self, profile: &mut fx::Profile) -> CategoryHandle {
        profile.add_category("Requests", CategoryColor::Green)
    }

    fn string_field_value(&self, field_index: u32) -> StringHandle {
        if field_index == 0 {
            self.label
        } else {
            self.caller
        }
    }

    fn number_field_value(&self, _field_index: u32) -> f64 {
        self.bytes
    }
}

/// One span per layer each request passed, on that layer's track.
pub fn request_spans(requests: &[SampledRequest]) -> Vec<Span> {
    let mut out = Vec::new();
    for r in requests {
        let mut since = r.call_ns;
        for p in &r.passes {
            let at = r.call_ns + p.offset_ns;
            // The call's return is its own track, from the entry.
            let start = if p.layer == RequestLayer::Call {
                r.call_ns
            } else {
                since.min(at)
            };
            out.push(Span {
                pid: REQUESTS_PID,
                tid: REQUESTS_PID + 1 + p.layer.to_u32() as i32,
                comm: p.layer.name().to_string(),
                start,
                end: at,
                what: SpanKind::Request {
                    label: format!("S{} {}", r.id, r.kind.name()),
                    caller: format!("{} {}", r.comm, r.tid),
                    bytes: p.bytes,
                },
            });
            if p.layer != RequestLayer::Call {
                since = at;
            }
        }
    }
    out
}
