// Apple's frameworks, by name only, for porter's Objective-C++ parse of a host .mm file
// (porter/emulate/host_compile.py). The wheel's MPS headers (ATen/mps/*.h,
// ATen/native/mps/OperationUtils.h) name these types; nothing here is used for their meaning,
// only so that the parse reaches the .mm file's own code. Errors inside headers are not read.
#pragma once
typedef signed char BOOL;
#define nil nullptr
#define NS_ASSUME_NONNULL_BEGIN
#define NS_ASSUME_NONNULL_END
typedef void* dispatch_queue_t;
typedef unsigned long NSUInteger;
typedef long NSInteger;
@interface NSObject
@end
@protocol NSObject
@end
@protocol MTLArgumentEncoder <NSObject>
@end
@protocol MTLBuffer <NSObject>
@end
@protocol MTLCommandQueue <NSObject>
@end
@protocol MTLComputeCommandEncoder <NSObject>
@end
@protocol MTLComputePipelineState <NSObject>
@end
@protocol MTLDevice <NSObject>
@end
@protocol MTLFunction <NSObject>
@end
@protocol MTLLibrary <NSObject>
@end
@protocol MTLSharedEvent <NSObject>
@end
@class MPSCommandBuffer;
@class MPSGraph;
@class MPSGraphCompilationDescriptor;
@class MPSGraphExecutionDescriptor;
@class MPSGraphTensor;
@class MPSGraphTensorData;
@class MPSKernel;
@class MPSNDArray;
@class MPSShape;
@class MTLCaptureManager;
@class MTLCompileOptions;
@class NSDictionary;
@class NSNumber;
typedef long MPSDataType;
typedef long MTLCommandBufferHandler;
typedef long os_log_t;
typedef long os_signpost_id_t;
typedef long os_signpost_type_t;
static const long MPSDataTypeInvalid = 0;
long MTLSizeMake(...);
long clock_gettime_nsec_np(...);
void dispatch_release(...);
void dispatch_sync(...);
