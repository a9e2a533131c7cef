// Written by `make payloads` (python -m tools.js_payloads) from hookwidgets/widget/protocol.py: do not edit.
/**
 * The shapes the kernel and the page exchange, as JSDoc typedefs for tsc (`npm --prefix js run typecheck`); what
 * each field means is in docs/widget-protocol.md. A `bytes` field arrives as a DataView; `Any` reads as `unknown`.
 * Import a shape in a JSDoc type: `import("./payloads.js").Status`.
 */

/**
 * @typedef {object} Dataflow
 * @property {DataflowNode[]} nodes
 * @property {DataflowEdge[]} edges
 */

/**
 * @typedef {object} DataflowEdge
 * @property {string} src
 * @property {string} dst
 * @property {number} tensors
 * @property {number} uses
 * @property {(number[] | null)[]} shapes
 */

/**
 * @typedef {object} DataflowNode
 * @property {string} module
 * @property {number} ops
 */

/**
 * @typedef {object} TreeNode
 * @property {string} path
 * @property {string} name
 * @property {string} cls
 * @property {number | null} trainable
 * @property {number | null} frozen
 * @property {number} packed
 * @property {(number | string)[] | null} shape
 * @property {string | null} dtype
 * @property {TreeNode[]} children
 */

/**
 * @typedef {object} HookItem
 * @property {string} path
 * @property {string} kind
 * @property {string} action
 * @property {unknown[][]} edit
 * @property {number} fired
 * @property {number} steps
 * @property {string | null} error
 * @property {string | null} note
 * @property {boolean} foreign
 * @property {string} edit_label
 */

/**
 * @typedef {object} HookKind
 * @property {string} kind
 * @property {string} name
 * @property {string} family
 * @property {string} phase
 * @property {string} tip
 * @property {string} badge
 * @property {boolean} every_layer
 * @property {boolean} common
 */

/**
 * @typedef {object} ParamChip
 * @property {string} name
 * @property {string} path
 * @property {number[] | null} shape
 * @property {boolean} trainable
 */

/**
 * @typedef {object} RecordChoice
 * @property {number} step
 * @property {number} call
 * @property {number[]} shape
 */

/**
 * @typedef {object} MethodWords
 * @property {string} name
 * @property {string} tip
 */

/**
 * @typedef {object} Selection
 * @property {string} path
 * @property {string} family
 * @property {string[]} kinds
 * @property {string[][]} details
 * @property {ParamChip[]} params
 * @property {string} code
 * @property {string} problem
 * @property {string[] | null} axes
 * @property {number | null} heads
 * @property {RecordChoice[]} records
 * @property {string[]} attribution_methods
 * @property {Record<string, MethodWords>} attribution_words
 * @property {string} attribution_note
 */

/**
 * @typedef {object} HoverAxis
 * @property {string} name
 * @property {string[] | null} labels
 * @property {number} start
 * @property {number} stride
 * @property {number} count
 */

/**
 * @typedef {object} CellsRegion
 * @property {"cells"} type
 * @property {number[]} box
 * @property {number} rows
 * @property {number} cols
 * @property {DataView} values
 * @property {HoverAxis} row
 * @property {HoverAxis} col
 * @property {string} label
 * @property {string} quantity
 * @property {string} aggregate
 */

/**
 * @typedef {object} LineSeries
 * @property {string} name
 * @property {DataView} values
 */

/**
 * @typedef {object} LinesRegion
 * @property {"lines"} type
 * @property {number[]} box
 * @property {DataView} x
 * @property {string} x_name
 * @property {number[]} x_limits
 * @property {LineSeries[]} series
 * @property {string} label
 */

/**
 * @typedef {object} Hover
 * @property {number} ratio
 * @property {number} width
 * @property {number} height
 * @property {boolean} pixelated
 * @property {(CellsRegion | LinesRegion)[]} regions
 */

/**
 * @typedef {object} PlotItem
 * @property {string} kind
 * @property {string} title
 * @property {number[] | null} shape
 * @property {string | null} dtype
 * @property {number} step
 * @property {number} call
 * @property {number[][]} positions
 * @property {boolean} stale
 * @property {boolean} verified
 * @property {string} element
 * @property {string[]} elements
 * @property {string} view
 * @property {string[]} views
 * @property {string[] | null} tokens
 * @property {number} heads
 * @property {number | null} head
 * @property {string | null} scale
 * @property {string[]} scales
 * @property {DataView} png
 * @property {Hover | null} hover
 * @property {string} edits
 */

/**
 * @typedef {object} Plots
 * @property {string | null} path
 * @property {PlotItem[]} items
 */

/**
 * @typedef {object} OutputScores
 * @property {string} kind
 * @property {string | null} tensor
 * @property {number[] | null} shape
 * @property {string | null} words
 * @property {number | null} positions
 * @property {boolean} decoder
 * @property {boolean} loss
 * @property {Record<string, string>} labels
 * @property {string} probe_failed
 */

/**
 * @typedef {object} Status
 * @property {string} state
 * @property {string} message
 * @property {unknown[][]} top
 * @property {OutputScores} output
 * @property {boolean} cell
 * @property {number} step
 * @property {string | null} failed
 */

/**
 * @typedef {object} ShortStep
 * @property {string} path
 * @property {string} kind
 * @property {string} note
 */

/**
 * @typedef {object} Memory
 * @property {number} bytes
 * @property {number} budget
 * @property {number} records
 * @property {number} evicted
 * @property {boolean} evicting
 * @property {ShortStep[]} short_steps
 */

/**
 * @typedef {object} SummaryFilter
 * @property {string} text
 * @property {boolean} blocks_only
 * @property {string} module_class
 */

/**
 * @typedef {object} Summary
 * @property {string[]} columns
 * @property {unknown[][]} rows
 * @property {string[]} fields
 * @property {string} field
 * @property {number[]} steps
 * @property {number | null} step
 * @property {string[]} nonfinite
 * @property {string | null} first_nonfinite
 * @property {DataView | null} heatmap
 * @property {Hover | null} heatmap_hover
 * @property {string} message
 * @property {SummaryFilter} filter
 * @property {number} total
 * @property {string[]} blocks
 * @property {string[]} classes
 */

/**
 * @typedef {object} RatioRow
 * @property {string} param
 * @property {string} optimizer
 * @property {number} step
 * @property {number | string} ratio
 * @property {number | string} update_norm
 * @property {number | string} weight_norm
 * @property {number | string} lr
 * @property {string} flag
 */

/**
 * @typedef {object} Ratios
 * @property {RatioRow[]} rows
 * @property {string[]} optimizers
 * @property {number} low
 * @property {number} high
 * @property {number} flagged
 * @property {DataView | null} png
 * @property {Hover | null} hover
 * @property {string} caption
 * @property {string} message
 */

/**
 * @typedef {object} ReadyRow
 * @property {number} order
 * @property {string} param
 * @property {number | string} ms
 */

/**
 * @typedef {object} Ready
 * @property {number | null} step
 * @property {number | null} rank
 * @property {ReadyRow[]} rows
 * @property {string} note
 */

/**
 * @typedef {object} DDPPanel
 * @property {string} source
 * @property {number[]} ranks
 * @property {number} steps
 * @property {number | null} step
 * @property {DataView | null} buckets_png
 * @property {Hover | null} buckets_hover
 * @property {DataView | null} ranks_png
 * @property {Hover | null} ranks_hover
 * @property {Ready} ready
 * @property {string} message
 */

/**
 * @typedef {object} Training
 * @property {boolean} visible
 * @property {Ratios | null} ratios
 * @property {DDPPanel | null} ddp
 * @property {number | null} step
 */

/**
 * @typedef {object} TokenScore
 * @property {string} text
 * @property {number | string} score
 */

/**
 * @typedef {object} Attribution
 * @property {string | null} layer
 * @property {string | null} method
 * @property {string | number | null} target
 * @property {DataView | null} png
 * @property {Hover | null} hover
 * @property {DataView | null} input_png
 * @property {Hover | null} input_hover
 * @property {TokenScore[] | null} tokens
 * @property {string} error
 * @property {string} caption
 * @property {string} note
 * @property {string} edits
 * @property {boolean} of_layer
 */

/**
 * @typedef {object} Lens
 * @property {boolean} available
 * @property {string} reason
 * @property {string[]} layers
 * @property {string[]} positions
 * @property {number} first
 * @property {number} top_k
 * @property {unknown[][][][]} cells
 * @property {string[]} answers
 * @property {number[][]} answer_probs
 * @property {number[][]} answer_ranks
 * @property {number[]} answer_first
 * @property {number} floor
 * @property {string} edits
 * @property {string} caption
 * @property {string} error
 */

/**
 * @typedef {object} Patching
 * @property {boolean} available
 * @property {string} reason
 * @property {string} mode
 * @property {string} clean
 * @property {string} corrupted
 * @property {string} hint
 * @property {string} metric
 * @property {string[]} tokens
 * @property {number[]} differs
 * @property {DataView | null} png
 * @property {Hover | null} hover
 * @property {string} caption
 * @property {number[] | null} progress
 * @property {string} error
 * @property {string} edits
 */

/**
 * @typedef {object} Frame
 * @property {number} width
 * @property {number} ratio
 */

/**
 * @typedef {object} Theme
 * @property {"light" | "dark"} name
 * @property {string} background
 * @property {string} foreground
 */

/**
 * @typedef {object} CompactGraph
 * @property {string[]} ids
 * @property {number[]} op
 * @property {string[]} ops
 * @property {number[]} module
 * @property {string[]} modules
 * @property {number[]} parents
 * @property {unknown[][]} params
 * @property {unknown[][]} saved
 * @property {number[][]} edges
 * @property {number[]} outputs
 */

/**
 * @typedef {object} Graph
 * @property {CompactGraph | null} autograd
 * @property {Dataflow | null} dataflow
 * @property {string} error
 * @property {boolean} recordable
 */

/**
 * @typedef {object} FirstNonfinite
 * @property {number} step
 * @property {number} rank
 * @property {string} path
 * @property {string} kind
 * @property {string} phase
 */

/**
 * @typedef {object} RunState
 * @property {string} source
 * @property {number[]} ranks
 * @property {string} rank
 * @property {number[]} steps
 * @property {string[]} kinds
 * @property {string} kind
 * @property {string[]} fields
 * @property {string} field
 * @property {number | null} step
 * @property {FirstNonfinite | null} first_nonfinite
 * @property {string[]} notes
 * @property {boolean} live
 * @property {string} stopped
 * @property {string} message
 */

/**
 * @typedef {object} Grid
 * @property {string} title
 * @property {string} row_name
 * @property {string} column_name
 * @property {string[]} rows
 * @property {string[]} columns
 * @property {DataView} values
 * @property {DataView} flags
 * @property {number[] | null} mark
 */

/**
 * @typedef {object} AttachMessage
 * @property {"attach"} type
 * @property {string} request_id
 * @property {string} path
 * @property {string} kind
 * @property {string | null} [action]
 * @property {unknown[] | null} [edit]
 */

/**
 * @typedef {object} ReattachMessage
 * @property {"reattach"} type
 * @property {string} request_id
 * @property {string} path
 * @property {string | null} [action]
 * @property {unknown[] | null} [edit]
 */

/**
 * @typedef {object} DetachMessage
 * @property {"detach"} type
 * @property {string} request_id
 * @property {string} path
 * @property {string} kind
 */

/**
 * @typedef {object} RunMessage
 * @property {"run"} type
 * @property {string} request_id
 * @property {string} [mode]
 * @property {string | number | null} [target]
 * @property {number | null} [position]
 * @property {boolean | null} [train]
 */

/**
 * @typedef {object} PlotStepMessage
 * @property {"plot_step"} type
 * @property {string} request_id
 * @property {string} kind
 * @property {number | null} step
 * @property {number | null} [call]
 */

/**
 * @typedef {object} PlotViewMessage
 * @property {"plot_view"} type
 * @property {string} request_id
 * @property {string} kind
 * @property {string} [view]
 * @property {string} [element]
 * @property {number | null} [head]
 * @property {string} [scale]
 */

/**
 * @typedef {object} SummaryMessage
 * @property {"summary"} type
 * @property {string} request_id
 * @property {string} [field]
 * @property {number} [step]
 * @property {string} [filter]
 * @property {boolean} [blocks_only]
 * @property {string} [module_class]
 */

/**
 * @typedef {object} FindNonfiniteMessage
 * @property {"find_nonfinite"} type
 * @property {string} request_id
 */

/**
 * @typedef {object} AttributeMessage
 * @property {"attribute"} type
 * @property {string} request_id
 * @property {string} layer
 * @property {string} method
 * @property {string | number | null} target
 * @property {number | null} [position]
 */

/**
 * @typedef {object} LensMessage
 * @property {"lens"} type
 * @property {string} request_id
 * @property {number} [top_k]
 */

/**
 * @typedef {object} PatchMessage
 * @property {"patch"} type
 * @property {string} request_id
 * @property {string} clean
 * @property {string} corrupted
 * @property {string} [metric]
 */

/**
 * @typedef {object} DismissErrorMessage
 * @property {"dismiss_error"} type
 * @property {string} request_id
 */

/**
 * @typedef {object} GraphMessage
 * @property {"graph"} type
 * @property {string} request_id
 */

/**
 * @typedef {object} Reply
 * @property {"reply"} type
 * @property {string | number} request_id
 * @property {boolean} ok
 * @property {string} error
 */

/**
 * Each synced traitlet's value as the page reads it (`model.get`): protocol.TRAITLETS.
 * @typedef {object} Traitlets
 * @property {Partial<TreeNode>} tree
 * @property {string} selected
 * @property {HookKind[]} hook_kinds
 * @property {HookItem[]} hooks
 * @property {Partial<Selection>} selection
 * @property {Plots} plots
 * @property {Partial<Status>} status
 * @property {Partial<Memory>} memory
 * @property {string[]} diagnostics
 * @property {Partial<Summary>} summary
 * @property {Training} training
 * @property {Partial<Attribution>} attribution
 * @property {Partial<Lens>} lens
 * @property {Patching} patching
 * @property {string} error
 * @property {Graph} graph
 * @property {Theme} theme
 * @property {Frame} frame
 * @property {string} closed
 */

/**
 * Each synced traitlet of the run view as the page reads it: protocol.RUN_TRAITLETS.
 * @typedef {object} RunTraitlets
 * @property {Partial<TreeNode>} tree
 * @property {string} selected
 * @property {string} kind
 * @property {string} field
 * @property {number} step
 * @property {string} rank
 * @property {Partial<RunState>} run
 * @property {Partial<Grid>} heatmap
 * @property {Partial<Grid>} ranks_view
 * @property {string} error
 */

/**
 * A message the page sends (protocol.MESSAGES), by its `type`.
 * @typedef {AttachMessage | ReattachMessage | DetachMessage | RunMessage | PlotStepMessage | PlotViewMessage
 *   | SummaryMessage | FindNonfiniteMessage | AttributeMessage | LensMessage | PatchMessage
 *   | DismissErrorMessage | GraphMessage} PageMessage
 */

export {};
