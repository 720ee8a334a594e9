//! # worldmesh-derive
//!
//! `#[derive(Replicate)]`: generates the implementation of
//! `worldmesh_replica::replicate::Replicate` — full state and delta codecs with a per-field
//! change mask (Colyseus's delta-encoded updates, paper `000` §5, §7) — for a game's
//! structs and enums. Use it through the re-export `worldmesh::Replicate` (or
//! `worldmesh_replica::Replicate`); the
//! trait's documentation (`worldmesh_replica::replicate`) describes the wire format, with
//! an example.
//!
//! Attributes:
//! - on a field: `#[replicate(skip)]` (not replicated: `Default` in a decoded full state,
//!   the baseline's value after a delta), `#[replicate(quantize = STEP)]` (an `f32` or
//!   `Point3` stored as whole steps; see `worldmesh_replica::replicate::Quantize`),
//!   `#[replicate(max_len = N)]` (a `Vec` field holds at most `N` elements on decode);
//! - on the type: `#[replicate(check = path::to::fn)]`, a `fn(&Self) -> Result<(),
//!   StateError>` run on every decoded value (full state or delta), for invariants the
//!   field types cannot express (e.g. a direction is at most unit length); it fails with
//!   `StateError::check("message")`.
//!
//! The generated decoders fail with a typed `worldmesh_replica::StateError`: `Truncated`,
//! `TrailingBytes`, `Invalid` (a value its type refuses: range, tag, non-finite float,
//! unknown change-mask bits, a bad delta header), `UnknownVariant` or the check's `Check`,
//! located by `StateError::At` at the `Type.field` where it happened.
//!
//! Structs with named or unnamed fields and enums with unit, tuple and struct variants are
//! supported; type parameters get a `Replicate` bound. Unions are refused.
//!
//! The generated code names the object layer by the path the deriving crate has for it,
//! read from its `Cargo.toml` (`proc-macro-crate`): `worldmesh-replica` if it depends on it
//! (under any name), else `worldmesh::replica` through the `worldmesh` facade — a game needs
//! only `worldmesh`. `#[replicate(crate = path)]` on the type names it explicitly.
#![forbid(unsafe_code)]

use proc_macro::TokenStream;
use proc_macro2::{Literal, Span, TokenStream as Tokens};
use quote::{format_ident, quote};
use syn::spanned::Spanned;
use syn::{Data, DeriveInput, Fields, Member, Type, parse_macro_input, parse_quote};

/// Derives `worldmesh_replica::replicate::Replicate` (see the crate documentation for the
/// attributes, and `worldmesh_replica::replicate` for the wire format and an example).
#[proc_macro_derive(Replicate, attributes(replicate))]
pub fn derive_replicate(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    match expand(input) {
        Ok(t) => t.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

/// How one field is replicated.
enum Kind {
    /// Through its own `Replicate` implementation.
    Plain,
    /// `#[replicate(quantize = STEP)]`: through `Quantize` with this step.
    Quantize(Literal),
    /// `#[replicate(max_len = N)]`: a `Vec` with this cap.
    MaxLen(usize),
    /// `#[replicate(skip)]`.
    Skip,
}

/// A field: how to name it, its type and how it is replicated.
struct Field {
    member: Member,
    ty: Type,
    kind: Kind,
    /// For error messages: `Type.field` or `Enum::Variant.field`.
    path: String,
}

fn parse_field_kind(attrs: &[syn::Attribute]) -> syn::Result<Kind> {
    let mut kind = Kind::Plain;
    for attr in attrs.iter().filter(|a| a.path().is_ident("replicate")) {
        attr.parse_nested_meta(|meta| {
            if !matches!(kind, Kind::Plain) {
                return Err(meta.error("at most one of `skip`, `quantize`, `max_len` per field"));
            }
            if meta.path.is_ident("skip") {
                kind = Kind::Skip;
            } else if meta.path.is_ident("quantize") {
                let lit: syn::Lit = meta.value()?.parse()?;
                let step: f64 = match &lit {
                    syn::Lit::Float(f) => f.base10_parse()?,
                    syn::Lit::Int(i) => i.base10_parse()?,
                    _ => return Err(syn::Error::new(lit.span(), "`quantize` takes a number, e.g. 0.01")),
                };
                let step = step as f32;
                if !(step.is_finite() && step > 0.0) {
                    return Err(syn::Error::new(lit.span(), "`quantize` step must be a positive finite number"));
                }
                kind = Kind::Quantize(Literal::f32_suffixed(step));
            } else if meta.path.is_ident("max_len") {
                let lit: syn::LitInt = meta.value()?.parse()?;
                kind = Kind::MaxLen(lit.base10_parse()?);
            } else {
                return Err(meta.error("unknown `replicate` field attribute (expected `skip`, `quantize = STEP` or `max_len = N`)"));
            }
            Ok(())
        })?;
    }
    Ok(kind)
}

fn parse_check(attrs: &[syn::Attribute]) -> syn::Result<Option<syn::Path>> {
    let mut check = None;
    for attr in attrs.iter().filter(|a| a.path().is_ident("replicate")) {
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("check") {
                check = Some(meta.value()?.parse::<syn::Path>()?);
                Ok(())
            } else if meta.path.is_ident("crate") {
                let _ = meta.value()?.parse::<syn::Path>()?; // read by `crate_path`
                Ok(())
            } else {
                Err(meta
                    .error("unknown `replicate` type attribute (expected `check = path` or `crate = path`)"))
            }
        })?;
    }
    Ok(check)
}

/// The path of the object layer (`worldmesh_replica`) in the deriving crate: the type's
/// `#[replicate(crate = path)]`, else found in the crate's manifest (see the crate docs).
fn crate_path(attrs: &[syn::Attribute]) -> syn::Result<Tokens> {
    let mut explicit = None;
    for attr in attrs.iter().filter(|a| a.path().is_ident("replicate")) {
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("crate") {
                explicit = Some(meta.value()?.parse::<syn::Path>()?);
            } else if meta.input.peek(syn::Token![=]) {
                let _ = meta.value()?.parse::<syn::Path>()?;
            }
            Ok(())
        })?;
    }
    if let Some(p) = explicit {
        return Ok(quote!(#p));
    }
    use proc_macro_crate::{FoundCrate, crate_name};
    let ident = |n: &str| syn::Ident::new(n, Span::call_site());
    Ok(match crate_name("worldmesh-replica") {
        // The replica crate itself names itself `worldmesh_replica` (`extern crate self`).
        Ok(FoundCrate::Itself) => quote!(::worldmesh_replica),
        Ok(FoundCrate::Name(n)) => {
            let n = ident(&n);
            quote!(::#n)
        }
        Err(_) => match crate_name("worldmesh") {
            Ok(FoundCrate::Name(n)) => {
                let n = ident(&n);
                quote!(::#n::replica)
            }
            Ok(FoundCrate::Itself) => quote!(crate::replica),
            Err(_) => quote!(::worldmesh_replica),
        },
    })
}

thread_local! {
    /// The object layer's path for the expansion under way (set by `expand`; a derive
    /// expands on one thread, start to end).
    static KRATE: std::cell::RefCell<Tokens> = std::cell::RefCell::new(quote!(::worldmesh_replica));
}

/// The object layer's path for the expansion under way.
fn krate() -> Tokens {
    KRATE.with(|k| k.borrow().clone())
}

fn fields_of(fields: &Fields, prefix: &str) -> syn::Result<Vec<Field>> {
    fields
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let member = match &f.ident {
                Some(id) => Member::Named(id.clone()),
                None => Member::Unnamed(syn::Index {
                    index: i as u32,
                    span: f.span(),
                }),
            };
            let name = match &f.ident {
                Some(id) => id.to_string(),
                None => i.to_string(),
            };
            Ok(Field {
                member,
                ty: f.ty.clone(),
                kind: parse_field_kind(&f.attrs)?,
                path: format!("{prefix}.{name}"),
            })
        })
        .collect()
}

/// The path of the runtime support module.
fn rt() -> Tokens {
    let k = krate();
    quote!(#k::replicate)
}

/// Per-field code snippets, by kind.
impl Field {
    fn bits(&self) -> Tokens {
        let (rt, ty) = (rt(), &self.ty);
        match &self.kind {
            Kind::Plain => quote!(<#ty as #rt::Replicate>::MASK_BITS),
            Kind::Quantize(_) => quote!(<#ty as #rt::Quantize>::MASK_BITS),
            Kind::MaxLen(_) => quote!(1u32),
            Kind::Skip => quote!(0u32),
        }
    }

    fn write_full(&self, a: &Tokens) -> Tokens {
        let rt = rt();
        match &self.kind {
            Kind::Plain => quote!(#rt::Replicate::write_full(#a, out);),
            Kind::Quantize(step) => quote!(#rt::Quantize::write_full_q(#a, #step, out);),
            Kind::MaxLen(_) => quote!(#rt::write_vec(#a, out);),
            Kind::Skip => quote!(),
        }
    }

    fn read_full(&self) -> Tokens {
        let (rt, ty, path) = (rt(), &self.ty, &self.path);
        let read = match &self.kind {
            Kind::Plain => quote!(<#ty as #rt::Replicate>::read_full(r)),
            Kind::Quantize(step) => quote!(<#ty as #rt::Quantize>::read_full_q(#step, r)),
            Kind::MaxLen(n) => quote!(#rt::read_vec(r, #n)),
            Kind::Skip => return quote!(::core::default::Default::default()),
        };
        quote!(#read.map_err(|e| e.within(#path))?)
    }

    fn changes(&self, a: &Tokens, b: &Tokens) -> Tokens {
        let rt = rt();
        match &self.kind {
            Kind::Plain => quote!(#rt::Replicate::changes(#a, #b)),
            Kind::Quantize(step) => quote!(#rt::Quantize::changes_q(#a, #b, #step)),
            Kind::MaxLen(_) => quote!(#rt::vec_changes(#a, #b)),
            Kind::Skip => quote!(0u64),
        }
    }

    fn write_changes(&self, a: &Tokens, b: &Tokens) -> Tokens {
        let rt = rt();
        match &self.kind {
            Kind::Plain => quote!(#rt::Replicate::write_changes(#a, #b, c, out);),
            Kind::Quantize(step) => quote!(#rt::Quantize::write_changes_q(#a, #b, #step, c, out);),
            Kind::MaxLen(_) => quote!(#rt::write_vec(#a, out);),
            Kind::Skip => quote!(),
        }
    }

    fn read_changes(&self, b: &Tokens) -> Tokens {
        let (rt, ty, path) = (rt(), &self.ty, &self.path);
        let read = match &self.kind {
            Kind::Plain => quote!(<#ty as #rt::Replicate>::read_changes(#b, c, r)),
            Kind::Quantize(step) => quote!(<#ty as #rt::Quantize>::read_changes_q(#b, #step, c, r)),
            Kind::MaxLen(n) => quote!(#rt::read_vec(r, #n)),
            Kind::Skip => return quote!(::core::clone::Clone::clone(#b)),
        };
        quote!(#read.map_err(|e| e.within(#path))?)
    }
}

/// `a + b + …` of the fields' mask bits (0 for none).
fn sum_bits(fields: &[Field]) -> Tokens {
    let bits: Vec<Tokens> = fields.iter().map(Field::bits).collect();
    if bits.is_empty() {
        quote!(0u32)
    } else {
        quote!(#(#bits)+*)
    }
}

/// The change mask of `fields` (accessed as `a[i]` and `b[i]`).
fn mask_expr(fields: &[Field], a: &[Tokens], b: &[Tokens]) -> Tokens {
    let rt = rt();
    let parts = fields
        .iter()
        .enumerate()
        .filter(|(_, f)| !matches!(f.kind, Kind::Skip))
        .map(|(i, f)| {
            let (changes, bits) = (f.changes(&a[i], &b[i]), f.bits());
            quote! {
                mask |= #rt::place_bits(#changes, offset);
                offset += #bits;
            }
        });
    quote! {{
        let mut mask = 0u64;
        let mut offset = 0u32;
        #(#parts)*
        let _ = offset;
        mask
    }}
}

/// Writes the changed fields of `mask` (in scope as `mask`).
fn write_changed(fields: &[Field], a: &[Tokens], b: &[Tokens]) -> Tokens {
    let rt = rt();
    let parts = fields
        .iter()
        .enumerate()
        .filter(|(_, f)| !matches!(f.kind, Kind::Skip))
        .map(|(i, f)| {
            let (write, bits) = (f.write_changes(&a[i], &b[i]), f.bits());
            quote! {
                let c = #rt::mask_bits(mask, offset, #bits);
                if c != 0 {
                    #write
                }
                offset += #bits;
            }
        });
    quote! {
        let mut offset = 0u32;
        #(#parts)*
        let _ = offset;
    }
}

/// `{ member: value, … }` reading the changed fields of `mask` against `b[i]`.
fn read_changed(fields: &[Field], b: &[Tokens]) -> Tokens {
    let rt = rt();
    let inits = fields.iter().enumerate().map(|(i, f)| {
        let (member, bits, read, bi) = (&f.member, f.bits(), f.read_changes(&b[i]), &b[i]);
        if matches!(f.kind, Kind::Skip) {
            return quote!(#member: #read);
        }
        quote! {
            #member: {
                let c = #rt::mask_bits(mask, offset, #bits);
                offset += #bits;
                if c != 0 { #read } else { ::core::clone::Clone::clone(#bi) }
            }
        }
    });
    quote!({ #(#inits),* })
}

/// `{ member: read_full, … }`.
fn read_full_init(fields: &[Field]) -> Tokens {
    let inits = fields.iter().map(|f| {
        let (member, read) = (&f.member, f.read_full());
        quote!(#member: #read)
    });
    quote!({ #(#inits),* })
}

fn check_call(check: &Option<syn::Path>, name: &str) -> Tokens {
    match check {
        Some(path) => quote!(#path(&value).map_err(|e| e.within(#name))?;),
        None => quote!(),
    }
}

fn expand(mut input: DeriveInput) -> syn::Result<Tokens> {
    let k = crate_path(&input.attrs)?;
    KRATE.with(|cell| *cell.borrow_mut() = k);
    let rt = rt();
    let check = parse_check(&input.attrs)?;
    let type_params: Vec<syn::Ident> = input.generics.type_params().map(|p| p.ident.clone()).collect();
    {
        let where_clause = input.generics.make_where_clause();
        for p in &type_params {
            where_clause.predicates.push(parse_quote!(#p: #rt::Replicate));
        }
    }
    let name = &input.ident;
    let name_str = name.to_string();
    let (impl_g, ty_g, where_g) = input.generics.split_for_impl();
    let body = match &input.data {
        Data::Struct(s) => expand_struct(&fields_of(&s.fields, &name_str)?, &check, &name_str),
        Data::Enum(e) => expand_enum(e, &check, &name_str)?,
        Data::Union(_) => {
            return Err(syn::Error::new(
                Span::call_site(),
                "`Replicate` cannot be derived for unions",
            ));
        }
    };
    Ok(quote! {
        #[automatically_derived]
        impl #impl_g #rt::Replicate for #name #ty_g #where_g {
            #body
        }
    })
}

/// The methods a type with its own delta header (a derived struct or enum) uses when it is
/// a field of another: changed if its header is not empty, then its own delta.
fn nested_delta_methods() -> Tokens {
    let rt = rt();
    let k = krate();
    quote! {
        fn changes(&self, baseline: &Self) -> u64 {
            u64::from(#rt::Replicate::delta_header(self, baseline) != 0)
        }

        fn write_changes(&self, baseline: &Self, _: u64, out: &mut ::std::vec::Vec<u8>) {
            #rt::write_nested_delta(self, baseline, out);
        }

        fn read_changes(
            baseline: &Self,
            _: u64,
            r: &mut #rt::Reader<'_>,
        ) -> ::core::result::Result<Self, #k::StateError> {
            #rt::read_nested_delta(baseline, r)
        }
    }
}

fn expand_struct(fields: &[Field], check: &Option<syn::Path>, name: &str) -> Tokens {
    let rt = rt();
    let k = krate();
    let nested = nested_delta_methods();
    let a: Vec<Tokens> = fields
        .iter()
        .map(|f| {
            let m = &f.member;
            quote!(&self.#m)
        })
        .collect();
    let b: Vec<Tokens> = fields
        .iter()
        .map(|f| {
            let m = &f.member;
            quote!(&baseline.#m)
        })
        .collect();
    let bits = sum_bits(fields);
    let writes = fields.iter().zip(&a).map(|(f, a)| f.write_full(a));
    let read_init = read_full_init(fields);
    let mask = mask_expr(fields, &a, &b);
    let write_changed = write_changed(fields, &a, &b);
    let read_changed = read_changed(fields, &b);
    let check = check_call(check, name);
    quote! {
        const HEADER_BITS: u32 = {
            let bits = #bits;
            assert!(bits <= 64, "a replicated struct's fields take at most 64 change-mask bits");
            bits
        };

        fn write_full(&self, out: &mut ::std::vec::Vec<u8>) {
            #(#writes)*
        }

        fn read_full(r: &mut #rt::Reader<'_>) -> ::core::result::Result<Self, #k::StateError> {
            let value = Self #read_init;
            #check
            Ok(value)
        }

        #nested

        fn delta_header(&self, baseline: &Self) -> u64 {
            #mask
        }

        fn write_delta_body(&self, baseline: &Self, header: u64, out: &mut ::std::vec::Vec<u8>) {
            let mask = header;
            #write_changed
        }

        fn read_delta_body(
            baseline: &Self,
            header: u64,
            r: &mut #rt::Reader<'_>,
        ) -> ::core::result::Result<Self, #k::StateError> {
            #rt::check_mask(header, <Self as #rt::Replicate>::HEADER_BITS, #name)?;
            let mask = header;
            let mut offset = 0u32;
            let value = Self #read_changed;
            let _ = offset;
            #check
            Ok(value)
        }
    }
}

/// One enum variant, prepared.
struct Variant {
    ident: syn::Ident,
    index: u64,
    fields: Vec<Field>,
    /// Bindings of the fields in `self` and in the baseline.
    a: Vec<Tokens>,
    b: Vec<Tokens>,
    /// A one-field variant whose field shares the enum's delta header.
    newtype: bool,
}

impl Variant {
    /// `Self::V { m0: a_0, … }` binding the fields as `names`.
    fn pattern(&self, names: &[Tokens]) -> Tokens {
        let ident = &self.ident;
        let binds = self.fields.iter().zip(names).map(|(f, n)| {
            let m = &f.member;
            quote!(#m: #n)
        });
        quote!(Self::#ident { #(#binds),* })
    }

    fn header_bits(&self) -> Tokens {
        let rt = rt();
        if self.newtype {
            let ty = &self.fields[0].ty;
            quote!(<#ty as #rt::Replicate>::HEADER_BITS)
        } else {
            sum_bits(&self.fields)
        }
    }
}

fn expand_enum(e: &syn::DataEnum, check: &Option<syn::Path>, name: &str) -> syn::Result<Tokens> {
    let rt = rt();
    let k = krate();
    let nested = nested_delta_methods();
    let variants: Vec<Variant> = e
        .variants
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let fields = fields_of(&v.fields, &format!("{name}::{}", v.ident))?;
            let a = (0..fields.len())
                .map(|k| {
                    let id = format_ident!("a_{k}");
                    quote!(#id)
                })
                .collect();
            let b = (0..fields.len())
                .map(|k| {
                    let id = format_ident!("b_{k}");
                    quote!(#id)
                })
                .collect();
            let newtype = fields.len() == 1 && matches!(fields[0].kind, Kind::Plain);
            Ok(Variant {
                ident: v.ident.clone(),
                index: i as u64,
                fields,
                a,
                b,
                newtype,
            })
        })
        .collect::<syn::Result<_>>()?;
    if variants.is_empty() {
        return Err(syn::Error::new(
            Span::call_site(),
            "`Replicate` cannot be derived for an enum without variants",
        ));
    }
    let count = variants.len() as u64;
    let variant_bits: Vec<Tokens> = variants.iter().map(Variant::header_bits).collect();
    let check = check_call(check, name);

    let write_full_arms = variants.iter().map(|v| {
        let pat = v.pattern(&v.a);
        let index = v.index;
        let writes = v.fields.iter().zip(&v.a).map(|(f, a)| f.write_full(a));
        quote!(#pat => { #rt::put_varint(out, #index); #(#writes)* })
    });
    let write_fields_arms = variants.iter().map(|v| {
        let pat = v.pattern(&v.a);
        let writes = v.fields.iter().zip(&v.a).map(|(f, a)| f.write_full(a));
        quote!(#pat => { #(#writes)* })
    });
    let read_variant_arms: Vec<Tokens> = variants
        .iter()
        .map(|v| {
            let (ident, index, init) = (&v.ident, v.index, read_full_init(&v.fields));
            quote!(#index => Self::#ident #init,)
        })
        .collect();
    let header_arms = variants.iter().map(|v| {
        let (pa, pb) = (v.pattern(&v.a), v.pattern(&v.b));
        let inner = if v.newtype {
            let (a0, b0) = (&v.a[0], &v.b[0]);
            quote!(#rt::Replicate::delta_header(#a0, #b0))
        } else {
            mask_expr(&v.fields, &v.a, &v.b)
        };
        quote!((#pa, #pb) => #inner,)
    });
    let changed_variant_arms = variants.iter().map(|v| {
        let ident = &v.ident;
        let index = v.index;
        quote!((Self::#ident { .. }, _) => #rt::place_bits(1, widest) | #rt::place_bits(#index, widest + 1),)
    });
    let write_body_arms = variants.iter().map(|v| {
        let (pa, pb) = (v.pattern(&v.a), v.pattern(&v.b));
        let body = if v.newtype {
            let (a0, b0) = (&v.a[0], &v.b[0]);
            quote!(#rt::Replicate::write_delta_body(#a0, #b0, mask, out);)
        } else {
            write_changed(&v.fields, &v.a, &v.b)
        };
        quote!((#pa, #pb) => { #body })
    });
    let read_body_arms = variants.iter().map(|v| {
        let pb = v.pattern(&v.b);
        let ident = &v.ident;
        let vname = format!("{name}::{ident}");
        if v.newtype {
            let (b0, m, path) = (&v.b[0], &v.fields[0].member, &v.fields[0].path);
            let ty = &v.fields[0].ty;
            quote!(#pb => Self::#ident {
                #m: <#ty as #rt::Replicate>::read_delta_body(#b0, mask, r).map_err(|e| e.within(#path))?
            },)
        } else {
            let bits = sum_bits(&v.fields);
            let init = read_changed(&v.fields, &v.b);
            quote!(#pb => {
                #rt::check_mask(mask, #bits, #vname)?;
                let mut offset = 0u32;
                let value = Self::#ident #init;
                let _ = offset;
                value
            })
        }
    });
    // The widest variant's header bits: a same-variant delta's header is that variant's
    // mask (below this bit); a variant change sets this bit, with the index above it.
    let widest = variant_bits
        .iter()
        .fold(quote!(0u32), |acc, b| quote!(#rt::max_bits(#acc, #b)));

    Ok(quote! {
        const HEADER_BITS: u32 = {
            let bits = #widest + 1 + #rt::bits_for(#count - 1);
            assert!(bits <= 64, "a replicated enum's delta header takes at most 64 bits");
            bits
        };

        fn write_full(&self, out: &mut ::std::vec::Vec<u8>) {
            match self {
                #(#write_full_arms)*
            }
        }

        fn read_full(r: &mut #rt::Reader<'_>) -> ::core::result::Result<Self, #k::StateError> {
            let index = r.varint()?;
            let value = match index {
                #(#read_variant_arms)*
                _ => return Err(#k::StateError::UnknownVariant { ty: #name, index }),
            };
            #check
            Ok(value)
        }

        #nested

        #[allow(unreachable_patterns, unused_variables)]
        fn delta_header(&self, baseline: &Self) -> u64 {
            // Force the header-width assertions at compile time.
            let _ = <Self as #rt::Replicate>::HEADER_BITS;
            let widest: u32 = #widest;
            match (self, baseline) {
                #(#header_arms)*
                #(#changed_variant_arms)*
            }
        }

        #[allow(unreachable_patterns, unused_variables)]
        fn write_delta_body(&self, baseline: &Self, header: u64, out: &mut ::std::vec::Vec<u8>) {
            let widest: u32 = #widest;
            if #rt::mask_bits(header, widest, 64) != 0 {
                match self {
                    #(#write_fields_arms)*
                }
                return;
            }
            let mask = header;
            match (self, baseline) {
                #(#write_body_arms)*
                _ => {}
            }
        }

        #[allow(unreachable_patterns, unused_variables)]
        fn read_delta_body(
            baseline: &Self,
            header: u64,
            r: &mut #rt::Reader<'_>,
        ) -> ::core::result::Result<Self, #k::StateError> {
            let widest: u32 = #widest;
            let top = #rt::mask_bits(header, widest, 64);
            let value = if top != 0 {
                if top & 1 == 0 {
                    return Err(#k::StateError::invalid("delta header", ::core::format_args!("{:#x}", header)).within(#name));
                }
                let index = top >> 1;
                match index {
                    #(#read_variant_arms)*
                    _ => return Err(#k::StateError::UnknownVariant { ty: #name, index }),
                }
            } else {
                let mask = header;
                match baseline {
                    #(#read_body_arms)*
                }
            };
            #check
            Ok(value)
        }
    })
}
