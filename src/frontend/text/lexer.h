/* lexer.h - the private interface between the Relay text lexer and the parser.
 *
 * The lexer turns bytes into tokens on demand (nothing is stored for the whole file) and never
 * reports diagnostics itself: a malformed token comes back as TK_ERROR with a LexError code, and
 * the caller decides whether to report it (the parser) or to skip it (the parser's pre-scan).
 * Every call advances by at least one byte, so a loop over text_lex_next always reaches TK_EOF. */
#ifndef RLY_TEXT_LEXER_H
#define RLY_TEXT_LEXER_H

#include <stdint.h>

typedef enum TokKind {
    TK_EOF,
    TK_ERROR,  /* aux: LexError */
    TK_IDENT,  /* [A-Za-z_][A-Za-z0-9_/]* ('.' segment)*, not a keyword */
    TK_LOCAL,  /* %name */
    TK_GRAPH,  /* %123 */
    TK_GLOBAL, /* @name */
    TK_NUMBER, /* [-]*digits[.eE+-digits]*[suffix], or [-]*(inf|nan)suffix; text is validated
                  by the parser. aux = 1 for a plain integer lexed right after a '.' */
    TK_STRING, /* "..." including the quotes */
    /* keywords */
    TK_LET,
    TK_FN,
    TK_DEF,
    TK_IF,
    TK_ELSE,
    TK_TYPE,
    TK_MATCH,
    TK_MATCH_PARTIAL, /* match? */
    TK_EXTERN,
    TK_FREE_VAR,
    TK_REF,
    TK_REF_READ,
    TK_REF_WRITE,
    TK_TRUE,
    TK_FALSE,
    /* punctuation */
    TK_LPAREN,
    TK_RPAREN,
    TK_LBRACKET,
    TK_RBRACKET,
    TK_LBRACE,
    TK_RBRACE,
    TK_COMMA,
    TK_SEMI,
    TK_COLON,
    TK_DOT,
    TK_EQ,        /* = */
    TK_FAT_ARROW, /* => */
    TK_ARROW,     /* -> */
    TK_EQEQ,
    TK_NE,
    TK_LT,
    TK_LE,
    TK_GT,
    TK_GE,
    TK_PLUS,
    TK_MINUS,
    TK_STAR,
    TK_SLASH,
    TK_QUESTION,
    TK_HASH,
    TK_KIND_COUNT
} TokKind;

typedef enum LexError {
    LEX_ERR_CHAR,    /* a byte that starts no token */
    LEX_ERR_STRING,  /* unterminated string literal */
    LEX_ERR_COMMENT, /* unterminated block comment (span: the outermost opening) */
    LEX_ERR_SIGIL,   /* '%' or '@' not followed by a name */
} LexError;

typedef struct Token {
    uint8_t kind;    /* TokKind */
    uint8_t aux;     /* TK_ERROR: LexError; TK_NUMBER: 1 after a '.' (plain digits) */
    uint32_t lo, hi; /* byte range [lo, hi) in the source */
} Token;

typedef struct Lexer {
    const char *src;
    uint32_t len;
    uint32_t pos;
    uint8_t prev; /* kind of the previous token: a number right after TK_DOT is plain digits */
} Lexer;

void text_lex_init(Lexer *lx, const char *src, uint32_t len);
Token text_lex_next(Lexer *lx);
/* A short fixed description of a token kind ("'('", "identifier", "end of input"). */
const char *text_lex_kind_name(TokKind k);

#endif /* RLY_TEXT_LEXER_H */
