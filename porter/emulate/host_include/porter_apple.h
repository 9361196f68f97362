// Apple's frameworks, by name, for porter's Objective-C++ parse of a host .mm file
// (porter/emulate/host_compile.py). The MPS headers (ATen/mps/*.h,
// ATen/native/mps/OperationUtils.h) name these types; nothing here is used for their meaning,
// only so that the parse reaches the .mm file's own code. The few members declared are those
// upstream's OperationUtils.h uses, so that a checkout's own copy of it parses cleanly (an
// upstream checkout reads its own, and was "not proven" on every op: NSArray<...>, a
// dictionary literal, an MPSGraph* passed as NSObject*, a property read into std::clamp).
#pragma once
typedef signed char BOOL;
#define nil nullptr
#define NS_ASSUME_NONNULL_BEGIN
#define NS_ASSUME_NONNULL_END
typedef void* dispatch_queue_t;
#define DISPATCH_QUEUE_SERIAL nullptr
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
@property(readonly) NSUInteger maxTotalThreadsPerThreadgroup;
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
@interface MPSGraph : NSObject
@end
@class MPSGraphCompilationDescriptor;
@class MPSGraphExecutionDescriptor;
@class MPSGraphTensor;
@class MPSGraphTensorData;
@interface MPSKernel : NSObject
@end
@class MPSNDArray;
@class MPSShape;
@class MTLCaptureManager;
@class MTLCompileOptions;
@interface NSArray<ObjectType> : NSObject
@end
@interface NSDictionary<KeyType, ObjectType> : NSObject
+ (id)dictionaryWithObjects:(const id[])objects forKeys:(const id[])keys count:(NSUInteger)count;
@end
@class NSNumber;
typedef long MPSDataType;
typedef long MTLCommandBufferHandler;
typedef long os_log_t;
typedef long os_signpost_id_t;
typedef long os_signpost_type_t;
static const long MPSDataTypeInvalid = 0;
long MTLSizeMake(...);
long clock_gettime_nsec_np(...);
dispatch_queue_t dispatch_queue_create(const char*, void*);
void dispatch_release(...);
void dispatch_sync(...);
