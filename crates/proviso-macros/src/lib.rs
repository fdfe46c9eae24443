//! Chainable setters, written once.
//!
//! proviso's option structs are `#[non_exhaustive]`, so a caller outside their crate builds
//! one from its `Default` and then sets fields by name. [`setters!`] writes those setters:
//! for each listed field, `fn field(mut self, value) -> Self`, documented with a link to the
//! field. A setter that does more than assign its field is written by hand beside it.

#![no_std]

/// Writes a chainable setter for each listed field of a struct.
///
/// ```
/// #[derive(Default)]
/// #[non_exhaustive]
/// pub struct Options {
///     /// Most tokens.
///     pub max_tokens: usize,
///     /// Stop texts.
///     pub stop: Vec<String>,
/// }
///
/// proviso_macros::setters!(Options {
///     max_tokens: usize,
///     stop: Vec<String>,
/// });
///
/// let options = Options::default().max_tokens(8).stop(vec!["END".into()]);
/// assert_eq!((options.max_tokens, options.stop.len()), (8, 1));
/// ```
#[macro_export]
macro_rules! setters {
    ($ty:ident { $( $field:ident : $fty:ty ),* $(,)? }) => {
        impl $ty {
            $(
                #[doc = concat!("Sets [`", stringify!($ty), "::", stringify!($field), "`].")]
                #[must_use]
                pub fn $field(mut self, $field: $fty) -> Self {
                    self.$field = $field;
                    self
                }
            )*
        }
    };
}
