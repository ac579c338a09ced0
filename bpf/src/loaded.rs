//! The skeleton and the object storage it borrows, owned together.

use std::mem::MaybeUninit;

use crate::skel::BpfperfSkel;

/// The skeleton and the object storage it borrows, on the heap so that neither moves; freed
/// skeleton first. (A skeleton borrows its `OpenObject` for its whole life: owning both in
/// one struct needs these raw pointers.)
pub(crate) struct Loaded {
    /// Null until the programs are loaded.
    pub(crate) skel: *mut BpfperfSkel<'static>,
    object: *mut MaybeUninit<libbpf_rs::OpenObject>,
}

impl Loaded {
    pub(crate) fn new() -> Loaded {
        Loaded {
            skel: std::ptr::null_mut(),
            object: Box::into_raw(Box::new(MaybeUninit::uninit())),
        }
    }

    /// The storage for the skeleton to open into.
    ///
    /// # Safety
    /// Call once; whatever borrows it must be dropped before `self` or moved into
    /// `self.skel`.
    pub(crate) unsafe fn storage(&mut self) -> &'static mut MaybeUninit<libbpf_rs::OpenObject> {
        // SAFETY: allocated in new(), freed only in drop(), borrowed once (caller's duty).
        unsafe { &mut *self.object }
    }

    /// The skeleton, if loaded.
    pub(crate) fn get(&self) -> Option<&BpfperfSkel<'static>> {
        // SAFETY: as in skel().
        (!self.skel.is_null()).then(|| unsafe { &*self.skel })
    }

    pub(crate) fn skel(&self) -> &BpfperfSkel<'static> {
        assert!(!self.skel.is_null(), "programs not loaded");
        // SAFETY: set from Box::into_raw once loaded, freed only in drop().
        unsafe { &*self.skel }
    }
}

impl Drop for Loaded {
    fn drop(&mut self) {
        // SAFETY: both pointers come from Box::into_raw and are freed once, here; the
        // skeleton borrows the object, so it goes first.
        unsafe {
            if !self.skel.is_null() {
                drop(Box::from_raw(self.skel));
            }
            drop(Box::from_raw(self.object));
        }
    }
}
