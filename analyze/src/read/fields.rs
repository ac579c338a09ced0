//! What a name reads from the samples of an event: a field of their payload (a traced
//! event's), or their latency (the period of a latency event, in ns). What `--weight`,
//! `trace -F`, `trace --format` and `hist` resolve their names to, once per event.

use format::{Field, FieldKind, Value};

use super::recording::{RawSample, Recording};
use crate::Error;

/// The name that reads a latency event's latency.
pub const LATENCY: &str = "latency";

/// A number or text that each sample of one event carries.
#[derive(Debug, Clone, Copy)]
pub enum Quantity<'r> {
    /// A field of the payload.
    Field(&'r Field),
    /// The sample's period, a latency in ns.
    Latency,
}

impl<'r> Quantity<'r> {
    /// What `name` reads from the samples of event `event`: its field of that name (also
    /// spelled `args->NAME`, as bpftrace and bcc spell tracepoint fields; `retval` is `ret`,
    /// as bcc spells a return value), else [`LATENCY`] for a latency event. An error names the
    /// event's fields.
    pub fn of(rec: &'r Recording, event: usize, name: &str) -> Result<Quantity<'r>, Error> {
        let name = name.strip_prefix("args->").unwrap_or(name);
        let format = rec.format(event);
        let field = |n: &str| format.and_then(|f| f.field(n));
        if let Some(f) = field(name).or_else(|| (name == "retval").then(|| field("ret"))?) {
            return Ok(Quantity::Field(f));
        }
        if name == LATENCY && rec.is_latency(event) {
            return Ok(Quantity::Latency);
        }
        Err(Error::NoSuchField {
            event: rec.events.get(event).cloned().unwrap_or_default(),
            field: name.to_string(),
            available: available(rec, event),
        })
    }

    /// [`Quantity::of`], for a number: a field of text or bytes is an error.
    pub fn number(rec: &'r Recording, event: usize, name: &str) -> Result<Quantity<'r>, Error> {
        let q = Quantity::of(rec, event, name)?;
        if let Quantity::Field(f) = q {
            if f.is_string() || !matches!(f.kind, FieldKind::Int) {
                return Err(Error::NotANumber {
                    event: rec.events[event].clone(),
                    field: f.name.clone(),
                    type_name: f.type_name.clone(),
                });
            }
        }
        Ok(q)
    }

    /// The quantity's name, as views print it.
    pub fn name(&self) -> &str {
        match self {
            Quantity::Field(f) => &f.name,
            Quantity::Latency => LATENCY,
        }
    }

    /// Its value in sample `s`; `None` where the payload is too short for the field (or
    /// lies about where its data is). A sample standing for several events (counted in the
    /// kernel, or merged) has their latencies summed as its period: its latency is their
    /// mean (within one power-of-two bucket, for a histogram counted in the kernel).
    pub fn value(&self, s: &RawSample) -> Option<Value> {
        match self {
            Quantity::Field(f) => f.value(s.raw.as_deref()?),
            Quantity::Latency => Some(Value::Unsigned(s.period / s.count.max(1))),
        }
    }

    /// Its value in `s` as a number (text and bytes: `None`).
    pub fn number_in(&self, s: &RawSample) -> Option<i128> {
        self.value(s)?.as_i128()
    }
}

/// The names event `event` offers, for messages: its own fields (the common header's left
/// out), and `latency` for a latency event; `none` if it has neither.
pub fn available(rec: &Recording, event: usize) -> String {
    let mut names: Vec<&str> = rec
        .format(event)
        .map(|f| f.own_fields().map(|f| f.name.as_str()).collect())
        .unwrap_or_default();
    if rec.is_latency(event) {
        names.push(LATENCY);
    }
    if names.is_empty() {
        return "none".into();
    }
    names.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::testing::{recording, return_payload, sample, write_payload};

    #[test]
    fn names_resolve_to_fields_or_latency() {
        let rec = recording();
        let write = sample(1, 7, 10, 1, &[], Some(write_payload(7, 1, 100)));
        let count = Quantity::number(&rec, 1, "count").unwrap();
        assert_eq!(count.number_in(&write), Some(100));
        assert_eq!(
            Quantity::of(&rec, 1, "args->fd").unwrap().value(&write),
            Some(Value::Unsigned(1))
        );
        let err = Quantity::of(&rec, 1, "latency").unwrap_err().to_string();
        assert!(
            err.contains("sys_enter_write has no field latency")
                && err.contains("__syscall_nr, fd, buf, count"),
            "{err}"
        );
        assert!(Quantity::of(&rec, 0, "count")
            .unwrap_err()
            .to_string()
            .contains("(its fields: none)"));

        let ret = sample(2, 300, 20, 5_000, &[], Some(return_payload(300, "a.b", -2)));
        assert_eq!(
            Quantity::of(&rec, 2, "retval").unwrap().number_in(&ret),
            Some(-2)
        );
        assert_eq!(
            Quantity::of(&rec, 2, "latency").unwrap().number_in(&ret),
            Some(5_000)
        );
        assert_eq!(
            Quantity::of(&rec, 2, "host").unwrap().value(&ret),
            Some(Value::Str("a.b".into()))
        );
        let err = Quantity::number(&rec, 2, "host").unwrap_err().to_string();
        assert!(err.contains("host") && err.contains("char[]"), "{err}");
        // A payload cut short: no value, no panic.
        let short = sample(
            1,
            7,
            10,
            1,
            &[],
            Some(write_payload(7, 1, 100)[..20].to_vec()),
        );
        assert_eq!(count.number_in(&short), None);
    }
}
